"""Command line: ``prompt-gateway serve|check|list --config FILE``. Thin: it parses, wires, prints."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio
import structlog

from gateway import __version__
from gateway.app import run_gateway, telemetry_wanted
from gateway.config import AuthSettings, Config, ServerSettings, load_config
from gateway.explaining import explain_command
from gateway.failed_start import answer_until_hangup, meant_for_stdio, one_line
from gateway.importer.clients import CLIENT_FORMATS, client_of
from gateway.importer.writer import import_client_config
from gateway.observability.logs import configure_logging
from gateway.protocol.control_chars import escaped, json_text
from gateway.protocol.errors import ConfigError, GatewayError, UpstreamError
from gateway.protocol.meta_keys import TAGS_META_KEY
from gateway.serve_command import serve_command
from gateway.serving import ensure_safe_exposure, listening_socket
from gateway.transports.child_env import withhold_inherited_descriptors

EXIT_OK, EXIT_UPSTREAM_FAILED, EXIT_CONFIG = 0, 1, 2
log = structlog.get_logger("gateway.cli")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prompt-gateway",
        description="Serve the prompts of many MCP servers through one endpoint, with namespacing, one "
        "cursor over all of them, and allow/deny policy.",
        epilog="Run 'prompt-gateway COMMAND --help' for a command's options. Configuration: see README.md.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    importer = commands.add_parser(
        "import",
        help="turn a client's MCP server list into a gateway config",
        description="Print a gateway TOML config made from the MCP servers of a Claude Desktop, Claude Code, "
        "Cursor, Windsurf, VS Code or Zed config file, read as that client reads it.",
    )
    importer.add_argument(
        "--from",
        dest="source",
        choices=CLIENT_FORMATS,
        default="auto",
        help="the client whose config FILE is (auto: told by its shape)",
    )
    importer.add_argument(
        "--workspace",
        help="the folder ${workspaceFolder} means (default: the parent of the .vscode/.cursor folder FILE is in)",
    )
    importer.add_argument("file", help="the client's JSON config")
    importer.add_argument("--output", "-o", help="write here instead of stdout (refuses to overwrite)")
    importer.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    for name, text in (
        ("serve", "serve the unified prompt list to MCP clients"),
        ("check", "validate the config, start every upstream, print their state, exit non-zero on failure"),
        ("list", "print the unified, policy-filtered prompt list"),
        ("health", "ask the running HTTP gateway of this config for /healthz: exit 0 if healthy (a probe)"),
        ("render", "print a prompt's messages as a client would receive them"),
        ("explain", "say why a caller (a token, or an access token's claims) sees a prompt or not"),
    ):
        sub = commands.add_parser(name, help=text, description=text)
        sub.add_argument("--config", "-c", required=True, help="path to the TOML config")
        sub.add_argument(
            "--log-level",
            default="warning" if name != "serve" else "info",
            choices=["debug", "info", "warning", "error"],
        )
        if name == "render":
            sub.add_argument("name", help="the prompt's name as clients see it (namespace__name)")
            sub.add_argument("--arg", action="append", default=[], metavar="K=V", help="an argument (repeatable)")
            sub.add_argument("--json", action="store_true", help="print the result as JSON")
        if name == "list":
            sub.add_argument("--json", action="store_true", help="print the prompts as JSON")
            sub.add_argument("--tag", action="append", help="only prompts with this tag (repeatable: all of them)")
        if name == "serve":
            sub.add_argument("--watch", action="store_true", help="reload the config when the file changes")
        if name == "explain":
            sub.add_argument("name", nargs="?", help="the prompt's name as clients see it (omit with --all)")
            sub.add_argument("--all", action="store_true", help="every prompt the upstreams list, one line each")
            caller = sub.add_mutually_exclusive_group()
            caller.add_argument("--token", metavar="TOKEN_NAME", help="as the [[server.tokens]] entry of this name")
            caller.add_argument(
                "--claims", metavar="FILE.json", help="as a person whose access token holds these claims"
            )
            sub.add_argument("--json", action="store_true", help="print the decisions as JSON")
    return parser


def _say(text: str = "", *, file: TextIO | None = None) -> None:
    """``print`` for text that may hold what came from elsewhere (an upstream's names and errors, a file's
    name, an issuer's key ids): line breaks stay, control characters show escaped instead of steering
    the terminal (docs/catalog.md)."""
    print(escaped(text, lines=True), file=file or sys.stdout)


def _table(rows: Sequence[Sequence[str]]) -> str:
    rows = [[escaped(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


async def _check(config: Config) -> int:
    if not config.upstreams:
        _say("prompt-gateway: the config has no [[upstreams]]: there is nothing to serve", file=sys.stderr)
        return EXIT_UPSTREAM_FAILED
    async with run_gateway(config, settle=True) as gateway:
        counts = await gateway.catalog.prompt_counts()
        visible = await gateway.catalog.all_prompts()
        collisions = await gateway.catalog.collisions()
        refused = gateway.catalog.refused_names()
        rows = [["UPSTREAM", "TRANSPORT", "STATE", "PROMPTS", "DETAIL"]]
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
            failed = failed or not connector.ready
            rows.append([connector.namespace, connector.settings.transport, connector.state, count_text, detail])
    _say(_table(rows))
    if file_lines:
        _say("\n" + "\n".join(escaped(line) for line in file_lines))
    _say(f"\n{len(visible['prompts'])} prompts visible through the gateway after policy.")
    for collision in collisions:
        _say(f"collision: {escaped(collision.name)} is served from {collision.winner}; {collision.loser}'s is hidden")
    for namespace, name in refused:
        _say(f"refused: {escaped(name)} of upstream {namespace} is hidden: its name holds control characters")
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
    _say()
    _say(_table(rows))
    return failed


def _print_prompts(listing: dict[str, Any]) -> None:
    rows = [["NAME", "ARGUMENTS", "DESCRIPTION"]]
    for prompt in listing["prompts"]:
        args = ", ".join(a.get("name", "?") + ("" if a.get("required") else "?") for a in prompt.get("arguments") or ())
        description = str(prompt.get("description") or prompt.get("title") or "").splitlines()
        rows.append([prompt["name"], args, description[0][:80] if description else ""])
    _say(_table(rows))


async def _list(gateway_config: Config, as_json: bool, tags: Sequence[str] = ()) -> int:
    async with run_gateway(gateway_config, settle=True) as gateway:
        listing = await gateway.catalog.all_prompts()
        failed = [c.namespace for c in gateway.connectors if not c.ready]
    if tags:
        wanted = set(tags)
        listing["prompts"] = [p for p in listing["prompts"] if wanted <= set(_tags_of(p))]
    if as_json:
        print(json_text(listing["prompts"], indent=2))
    else:
        _print_prompts(listing)
    for namespace in sorted(set(failed) | set(listing["unavailable"])):
        _say(f"warning: upstream {namespace} is unavailable; its prompts are missing", file=sys.stderr)
    return EXIT_UPSTREAM_FAILED if failed else EXIT_OK


async def _render(gateway_config: Config, name: str, pairs: Sequence[str], as_json: bool) -> int:
    arguments = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            _say(f"prompt-gateway: --arg {pair!r} is not K=V", file=sys.stderr)
            return EXIT_CONFIG
        arguments[key] = value
    async with run_gateway(gateway_config, settle=True) as gateway:
        try:
            result = await gateway.catalog.get_prompt({"name": name, "arguments": arguments})
        except GatewayError as exc:
            _say(f"prompt-gateway: {exc.message}", file=sys.stderr)
            return EXIT_UPSTREAM_FAILED
    if as_json:
        print(json_text(result, indent=2))
        return EXIT_OK
    for message in result.get("messages", []):
        content = message.get("content") or {}
        text = content.get("text") if content.get("type") == "text" else f"[{content.get('type', '?')} content]"
        _say(f"── {escaped(str(message.get('role', '?')))} ──\n{text}\n")
    return EXIT_OK


def _tags_of(prompt: dict[str, Any]) -> list[str]:
    meta = prompt.get("_meta")
    tags = meta.get(TAGS_META_KEY) if isinstance(meta, dict) else None
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


def _import(args: argparse.Namespace) -> int:
    try:
        location = str(Path(args.file).resolve())
        named, project = client_of(location)
        workspace = str(Path(args.workspace).resolve()) if args.workspace else None  # as clients record it
        with open(args.file, encoding="utf-8") as source:
            imported = import_client_config(
                source.read(),
                client=args.source if args.source != "auto" else named,
                workspace=workspace or project,
                project=workspace or project,
            )
        if args.output:
            with open(args.output, "x", encoding="utf-8") as target:
                target.write(imported.toml)
        else:
            sys.stdout.write(imported.toml)
        for warning in imported.warnings:  # after the output: none for a file refused
            _say(f"prompt-gateway: warning: {escaped(warning)}", file=sys.stderr)
    except ConfigError as exc:
        _say(f"prompt-gateway: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG
    except FileExistsError:
        _say(f"prompt-gateway: {args.output} exists already; choose another file or remove it", file=sys.stderr)
        return EXIT_CONFIG
    except OSError as exc:
        _say(f"prompt-gateway: cannot use {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_CONFIG
    return EXIT_OK


def _health(server: ServerSettings) -> int:
    """The Docker health check: the address comes from the config, so it follows the configured port."""
    import urllib.request  # only here: every other command starts without it

    if server.transport != "http":
        _say("prompt-gateway: this config serves stdio; there is no HTTP health endpoint", file=sys.stderr)
        return EXIT_CONFIG
    if server.port == 0:
        _say("prompt-gateway: port = 0 picks a port at start-up; health needs a fixed port", file=sys.stderr)
        return EXIT_CONFIG
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(server.host, server.host)  # noqa: S104
    url = f"http://{f'[{host}]' if ':' in host else host}:{server.port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            status = response.status
    except (OSError, ValueError) as exc:
        _say(f"prompt-gateway: {url}: {getattr(exc, 'reason', exc)}", file=sys.stderr)
        return EXIT_UPSTREAM_FAILED
    _say(f"{url}: {status}")
    return EXIT_OK if status == 200 else EXIT_UPSTREAM_FAILED


def _event_loop_options() -> dict[str, Any]:
    """uvloop where it is installed (a dependency except on Windows): its event loop and transports are
    C, which a proxy doing two HTTP exchanges per request feels (docs/performance.md)."""
    return {"use_uvloop": importlib.util.find_spec("uvloop") is not None}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args.log_level)
    if args.command == "import":
        return _import(args)
    try:
        config = load_config(args.config)
        if args.command in ("serve", "check"):
            telemetry_wanted(config.telemetry)
        if args.command == "serve":
            ensure_safe_exposure(config)
    except ConfigError as exc:
        return _cannot_start(args, exc.message)
    if args.command == "serve":
        withhold_inherited_descriptors()  # uvloop's children would inherit them (libuv has no close_fds)
        sock = None
        if config.server.transport == "http":  # bound before any upstream starts: a taken port fails at once
            try:
                sock = listening_socket(config.server.host, config.server.port)
            except OSError as exc:
                where = f"{config.server.host}:{config.server.port}"
                _say(f"prompt-gateway: cannot listen on {where}: {exc.strerror or exc}", file=sys.stderr)
                return EXIT_CONFIG
        return anyio.run(serve_command, config, args.config, args.watch, sock, backend_options=_event_loop_options())
    if args.command == "check":
        return anyio.run(_check, config)
    if args.command == "health":
        return _health(config.server)
    if args.command == "render":
        return anyio.run(_render, config, args.name, tuple(args.arg), args.json)
    if args.command == "explain":
        return _explain(config, args)
    return anyio.run(_list, config, args.json, tuple(args.tag or ()))


def _cannot_start(args: argparse.Namespace, reason: str) -> int:
    """The config cannot be used. ``serve`` says why on one line, and to the MCP client that launched it
    over stdio as the error of each of its requests (``failed_start.py``): not just "Connection closed"."""
    if args.command != "serve":
        _say(f"prompt-gateway: {reason}", file=sys.stderr)
        return EXIT_CONFIG
    line = one_line(reason)
    _say(f"prompt-gateway: {line}", file=sys.stderr)
    if meant_for_stdio(args.config):
        anyio.run(answer_until_hangup, line)
    return EXIT_CONFIG


def _explain(config: Config, args: argparse.Namespace) -> int:
    if (args.name is None) == (not args.all):
        _say("prompt-gateway: explain takes a prompt NAME or --all, not both", file=sys.stderr)
        return EXIT_CONFIG
    try:
        run = functools.partial(explain_command, token=args.token, claims_file=args.claims, as_json=args.json)
        return anyio.run(run, config, None if args.all else args.name)
    except ConfigError as exc:
        _say(f"prompt-gateway: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
