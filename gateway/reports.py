"""``prompt-gateway check`` and ``list``: what the gateway would serve, as tables (or JSON) for a person.

Both start the gateway as ``serve`` does and ask its catalog, so what they say is what clients get:
prompts, and where some upstream serves skills (docs/skills.md), skills beside them. ``check`` counts
each upstream's prompts and skills before policy and says what is wrong with its files; ``list`` shows
what a client without a token sees after policy, the skills in a table of their own (``--skills``:
only them, as JSON too, since ``list --json`` has always been the array of prompts).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

from gateway.app import run_gateway
from gateway.catalog.policy import Viewer
from gateway.catalog.skills import SkillCatalog, skill_tags, skill_uri
from gateway.config import AuthSettings, Config
from gateway.protocol.control_chars import escaped, json_text
from gateway.protocol.errors import UpstreamError
from gateway.protocol.meta_keys import TAGS_META_KEY
from gateway.protocol.skills import SKILL_FILE

EXIT_OK, EXIT_UPSTREAM_FAILED = 0, 1


def say(text: str = "", *, file: TextIO | None = None) -> None:
    """``print`` for text that may hold what came from elsewhere (an upstream's names and errors, a file's
    name, an issuer's key ids): line breaks stay, control characters show escaped instead of steering
    the terminal (docs/catalog.md)."""
    print(escaped(text, lines=True), file=file or sys.stdout)


def table(rows: Sequence[Sequence[str]]) -> str:
    rows = [[escaped(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


async def check_command(config: Config) -> int:
    if not config.upstreams:
        say("prompt-gateway: the config has no [[upstreams]]: there is nothing to serve", file=sys.stderr)
        return EXIT_UPSTREAM_FAILED
    async with run_gateway(config, settle=True) as gateway:
        counts = await gateway.catalog.prompt_counts()
        visible = await gateway.catalog.all_prompts()
        collisions = await gateway.catalog.collisions()
        refused = gateway.catalog.refused_names()
        unmatched = await gateway.catalog.override_notes()
        skill_catalog = gateway.catalog.skills
        skills = await skill_catalog.every() if skill_catalog.offered else {}
        visible_skills = sum(
            skill_catalog.visible(held[0], skill) for held in skills.values() if held is not None for skill in held[1]
        )
        rows = [["UPSTREAM", "TRANSPORT", "STATE", "PROMPTS", *(["SKILLS"] if skill_catalog.offered else []), "DETAIL"]]
        failed = False
        file_lines: list[str] = []  # a directory's problems and notes, each on a line of its own
        for connector in gateway.connectors:
            count = counts[connector.namespace]
            detail = connector.last_error or ""
            if isinstance(count, UpstreamError):
                detail, count_text, failed = detail or count.message, "-", True
            else:
                count_text = str(count)
                problems = getattr(connector, "problems", None)  # a directory of prompt files: its broken ones
                not_skills = getattr(connector, "skill_problems", None) or {}  # "both": still prompts, not skills
                notes = getattr(connector, "notes", None) or []
                file_lines += [f"{connector.namespace}: broken: {problem}" for problem in (problems or {}).values()]
                file_lines += [
                    f"{connector.namespace}: not a skill (still served as a prompt): {problem}"
                    for problem in not_skills.values()
                ]
                file_lines += [f"{connector.namespace}: note: {note}" for note in notes]
                if problems or not_skills:
                    said = [f"{len(problems)} broken files"] if problems else []
                    said += [f"{len(not_skills)} refused as skills"] if not_skills else []
                    detail, failed = ", ".join(said) + " (below); the others serve", True
                elif notes:
                    detail = f"{len(notes)} notes (below)"
                elif connector.ready:
                    version = connector.protocol_version
                    detail = connector.server_info.get("name", "?") + (f" (MCP {version})" if version else "")
                    if skill_catalog.declares(connector.namespace) is False:
                        detail += "; declares no Skills extension: no skills to relay"
            failed = failed or not connector.ready
            held = skills.get(connector.namespace)
            skill_count = [str(len(held[1])) if held is not None else "-"] if skill_catalog.offered else []
            rows.append(
                [connector.namespace, connector.settings.transport, connector.state, count_text, *skill_count, detail]
            )
    say(table(rows))
    if file_lines:
        say("\n" + "\n".join(escaped(line) for line in file_lines))
    also = f" and {visible_skills} skills" if skill_catalog.offered else ""
    say(f"\n{len(visible['prompts'])} prompts{also} visible through the gateway after policy.")
    for collision in collisions:
        say(f"collision: {escaped(collision.name)} is served from {collision.winner}; {collision.loser}'s is hidden")
    for namespace, name in refused:
        say(f"refused: {escaped(name)} of upstream {namespace} is hidden: its name holds control characters")
    for namespace, note in unmatched:
        say(f"{namespace}: note: {escaped(note)}")
    if config.server.auth is not None:
        auth_failed = await _check_issuers(config.server.auth)
        failed = failed or auth_failed
    return EXIT_UPSTREAM_FAILED if failed else EXIT_OK


async def _check_issuers(settings: AuthSettings) -> bool:
    """Each issuer's metadata and keys, fetched as the gateway will: True when one fails."""
    from gateway.identity.access_tokens import AccessTokenValidator, IssuerUnavailable

    rows = [["ISSUER", "STATE", "DETAIL"]]
    failed = False
    for keys in AccessTokenValidator(settings).issuers:
        try:
            loaded = await keys.load()
        except IssuerUnavailable as exc:
            rows.append([keys.settings.issuer, "failed", str(exc)])
            failed = True
        else:
            kids = ", ".join(k.key_id or "(no kid)" for k in loaded.keys)
            rows.append(
                [keys.settings.issuer, "ready", f"{len(loaded.keys)} keys from {await keys.discover()}: {kids}"]
            )
    say()
    say(table(rows))
    return failed


def _print_prompts(prompts: list[dict[str, Any]]) -> None:
    rows = [["NAME", "ARGUMENTS", "DESCRIPTION"]]
    for prompt in prompts:
        args = ", ".join(a.get("name", "?") + ("" if a.get("required") else "?") for a in prompt.get("arguments") or ())
        description = str(prompt.get("description") or prompt.get("title") or "").splitlines()
        rows.append([prompt["name"], args, description[0][:80] if description else ""])
    say(table(rows))


def _print_skills(skills: list[dict[str, Any]]) -> None:
    if not skills:  # a header over nothing read as if something were missing from it
        say("No skills are visible through the gateway ('check' names a skill folder it could not serve).")
        return
    rows = [["SKILL", "FILES", "DESCRIPTION"]]
    for skill in skills:
        description = skill["description"].splitlines()
        rows.append([skill["uri"], str(skill["files"]), description[0][:80] if description else ""])
    say(table(rows))


async def list_command(
    config: Config, as_json: bool, tags: Sequence[str] = (), *, skills_only: bool = False, viewer: Viewer | None = None
) -> int:
    """What a client sees: one without a token, or (``viewer``) one with a ``[[server.tokens]]`` entry's."""
    async with run_gateway(config, settle=True) as gateway:
        listing = await gateway.catalog.all_prompts(viewer=viewer)
        offered = gateway.catalog.skills.offered
        skills = await _visible_skills(gateway.catalog.skills, set(tags), viewer) if offered else []
        failed = [c.namespace for c in gateway.connectors if not c.ready]
    prompts = listing["prompts"]
    if tags:
        prompts = [p for p in prompts if set(tags) <= set(_tags_of(p))]
    if as_json:
        print(json_text(skills if skills_only else prompts, indent=2))
        if skills and not skills_only:
            say(
                f"prompt-gateway: {len(skills)} skills are served too: 'list --skills --json' lists them",
                file=sys.stderr,
            )
    else:
        if not skills_only and (prompts or not offered):
            _print_prompts(prompts)
        if offered:
            if not skills_only and prompts:
                say()
            _print_skills(skills)
    what = "skills" if skills_only else "prompts and skills" if offered else "prompts"
    for namespace in sorted(set(failed) | set(listing["unavailable"])):
        say(f"warning: upstream {namespace} is unavailable; its {what} are missing", file=sys.stderr)
    return EXIT_UPSTREAM_FAILED if failed else EXIT_OK


async def _visible_skills(catalog: SkillCatalog, tags: set[str], viewer: Viewer | None) -> list[dict[str, Any]]:
    """The skills a client (without a token, or ``viewer``) is served, as ``list`` shows them (with
    ``tags``: only those carrying every one)."""
    found: list[dict[str, Any]] = []
    for namespace, held in (await catalog.every()).items():
        if held is None:
            continue
        mount, skills = held
        for skill in skills:
            own_tags = skill_tags(skill, mount)
            if catalog.visible(mount, skill, viewer) and tags <= set(own_tags):
                found.append(
                    {
                        "uri": skill_uri(namespace, skill.path, SKILL_FILE),
                        "name": skill.name,
                        "policyName": mount.natural_name(skill.path),
                        "description": skill.description,
                        "files": len(skill.files),
                        "tags": list(own_tags),
                    }
                )
    return found


def _tags_of(prompt: dict[str, Any]) -> list[str]:
    meta = prompt.get("_meta")
    tags = meta.get(TAGS_META_KEY) if isinstance(meta, dict) else None
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []
