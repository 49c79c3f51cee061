"""Why a caller sees a prompt or not, from the policy code that serves requests: each policy that applies
(the upstream's own on its own name, the global one, the caller's token or views) asked in turn with
``Rules.decide``, which answers what ``Rules.allows`` answers and names the rule; the override that
shaped the prompt's name, and the collision that hid it behind another upstream's prompt of the same
name. A skill is explained by the same rules on the same names (its path, and its policy name
``<namespace><sep><path>``: docs/skills.md); skills never collide, their URIs carry the namespace.
Sans-IO: the catalog hands in what it has indexed.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gateway.catalog.mounts import Mount
from gateway.catalog.policy import Decision, Rules
from gateway.protocol.control_chars import escaped, has_control_chars

NAMING_RULE = "the gateway's naming rule"
REFUSED_NAME = Decision(False, "no control characters in a prompt name", "the name")
"""Why a prompt whose public name would steer a display is hidden from everyone (docs/catalog.md)."""


@dataclass(frozen=True, slots=True)
class Layer:
    """One policy a caller's requests go through, named as the config names it."""

    name: str  # "the global [policy]", "token ci", "view contractors"
    rules: Rules


@dataclass(frozen=True)
class Explanation:
    """One prompt, for one caller."""

    public: str  # the name clients see
    natural: str  # its name before any rename (namespace and the upstream's own name)
    upstream: str
    local: str  # the upstream's own name
    tags: tuple[str, ...]
    renamed: bool  # an override gave it its public name (deny rules judge the name before it too)
    decisions: tuple[tuple[str, Decision], ...]  # each policy's answer, in the order they apply
    shown_instead: str | None = None  # the upstream whose prompt of the same name is shown in its place
    overridden: tuple[str, ...] = field(default=())  # what its override changes: "name", "description"...
    skill_uri: str | None = None  # a skill's (its SKILL.md's URI), not a prompt's

    @property
    def visible(self) -> bool:
        return self.shown_instead is None and all(decision.allowed for _, decision in self.decisions)

    @property
    def decided_by(self) -> str:
        """The policy and rule that hid it, or what let it through."""
        if self.shown_instead is not None:
            return f"a collision: upstream {self.shown_instead} shows a prompt of the same name first"
        for where, decision in self.decisions:
            if not decision.allowed:
                return f"{where}: {decision.rule} ({decision.matched})"
        return "; ".join(f"{where}: {decision.rule}" for where, decision in self.decisions)

    def described(self) -> list[str]:
        """The explanation in words, as ``prompt-gateway explain`` and the operator page print it."""
        verdict = "visible" if self.visible else "hidden"
        origin = f"upstream {self.upstream}, its own name {self.local!r}"
        if self.skill_uri is not None:
            origin = f"the skill {self.skill_uri} of upstream {self.upstream}, its path {self.local!r}"
        if self.renamed:
            origin += ", renamed by an override"
        lines = [f"{escaped(self.public)}: {verdict}  ({origin})"]
        if self.overridden:
            lines.append(f"  override sets: {', '.join(self.overridden)}")
        if self.tags:
            lines.append(f"  tags: {escaped(', '.join(self.tags))}")
        for where, decision in self.decisions:
            lines.append(
                f"  {where}: {'allows' if decision.allowed else 'hides'} it, {decision.rule} ({decision.matched})"
            )
            if not decision.allowed:
                break  # deny wins: what comes after never decides
        if self.shown_instead is not None:
            lines.append(f"  hidden by a collision: upstream {self.shown_instead} shows a prompt of this name first")
        return lines

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.public,
            **({"uri": self.skill_uri} if self.skill_uri is not None else {}),
            "visible": self.visible,
            "decidedBy": self.decided_by,
            "upstream": self.upstream,
            "upstreamName": self.local,
            "renamed": self.renamed,
            "overridden": list(self.overridden),
            "tags": list(self.tags),
            "policies": [
                {"policy": where, "allowed": d.allowed, "rule": d.rule, "matched": d.matched}
                for where, d in self.decisions
            ],
            "shownInstead": self.shown_instead,
        }


def explain(mount: Mount, local: str, tags: tuple[str, ...], layers: Sequence[Layer]) -> Explanation:
    """Upstream ``mount``'s prompt ``local`` for a caller whose requests go through ``layers`` (the
    global policy first), as the catalog's visibility check decides it."""
    public = mount.public_name(local)
    natural = mount.natural_name(local)
    decisions = [(NAMING_RULE, REFUSED_NAME)] if has_control_chars(public) else []
    decisions.append((f"the policy of upstream {mount.namespace}", mount.rules.decide(local, tags)))
    decisions += [(layer.name, layer.rules.decide(public, tags, original=natural)) for layer in layers]
    override = mount.overrides.get(local)
    overridden = (
        tuple(sorted(k for k, v in override.model_dump(exclude_defaults=True).items() if v)) if override else ()
    )
    return Explanation(
        public=public,
        natural=natural,
        upstream=mount.namespace,
        local=local,
        tags=tags,
        renamed=public != natural,
        decisions=tuple(decisions),
        overridden=overridden,
    )


def explain_skill(mount: Mount, path: str, uri: str, tags: tuple[str, ...], layers: Sequence[Layer]) -> Explanation:
    """Upstream ``mount``'s skill at ``path`` (its SKILL.md at ``uri``) for a caller whose requests go
    through ``layers`` (the global policy first), as the skill catalog's visibility check decides it:
    the upstream's own policy on the path, the others on the policy name. An override of the same name
    gives it tags, nothing else."""
    public = mount.natural_name(path)
    decisions = [(f"the policy of upstream {mount.namespace}", mount.rules.decide(path, tags))]
    decisions += [(layer.name, layer.rules.decide(public, tags)) for layer in layers]
    override = mount.overrides.get(path)
    return Explanation(
        public=public,
        natural=public,
        upstream=mount.namespace,
        local=path,
        tags=tags,
        renamed=False,
        decisions=tuple(decisions),
        overridden=("tags",) if override is not None and override.tags else (),
        skill_uri=uri,
    )


class Explained(NamedTuple):
    """The prompts and skills a name names, explained; the upstreams that could not be read; and, when
    the name named nothing, every prompt and skill (what ``not_found`` suggests names from)."""

    prompts: list[Explanation]
    skills: list[Explanation]
    unavailable: list[str]
    everything: list[Explanation]


def not_found(name: str, everything: Sequence[Explanation]) -> str:
    """Why no prompt (or skill) is called ``name``: an override renamed it (to what), or the closest names."""
    for item in everything:
        if item.renamed and item.natural == name:
            renamed = f"an override of upstream {item.upstream} renamed it to {item.public!r}"
            return f"{name!r} is not a name clients see: {renamed}"
    names = dict.fromkeys(item.public for item in everything)
    near = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    what = "a prompt or a skill" if any(item.skill_uri is not None for item in everything) else "a prompt"
    return f"no upstream lists {what} named {name!r}{hint}"
