"""The arguments a prompt accepts in a ``prompts/get``, as its clients see them (after its override),
sans I/O: worked out once per listing entry (the catalog keeps it until the upstream's listing changes)
so that a get only looks names up.

A client's argument that the prompt does not list is refused (-32602, naming it) before anything
reaches the upstream: upstreams answer it in every way (an SDK server with a bare code 0), and a
misspelt name silently ignored is worse. The exception is an upstream's prompt that lists no
arguments at all: many servers read arguments they never declare, so those pass through as sent. The
gateway's own sources (prompt files) list every argument they take, so theirs are always checked.
An override's fixed arguments are not the client's to send (``overrides.forwarded_arguments`` refuses
them with its own words); its defaults make an argument optional.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.config import PromptOverride
from gateway.protocol.errors import InvalidParams

MAX_NAMES_SAID = 20
"""How many of a prompt's argument names a refusal lists (a prompt may declare thousands)."""
MAX_NAME_CHARS = 100


@dataclass(frozen=True, slots=True)
class Accepted:
    names: frozenset[str] | None
    """What a client may send; None when anything passes (an upstream's prompt that lists none)."""
    listed: tuple[str, ...]
    """The same, in the listing's order, for the refusal's message."""
    required: tuple[str, ...]
    """What must be there once defaults and fixed values are filled in (the upstream's own flags)."""


def accepted(entry: Mapping[str, Any], override: PromptOverride | None, *, own_source: bool) -> Accepted:
    declared = [a for a in entry.get("arguments") or () if isinstance(a, Mapping) and isinstance(a.get("name"), str)]
    required = tuple(a["name"] for a in declared if a.get("required") is True)
    fixed = override.fixed if override is not None else {}
    listed = tuple(dict.fromkeys(a["name"] for a in declared if a["name"] not in fixed))
    if not declared and not own_source:
        return Accepted(None, (), required)
    return Accepted(frozenset(listed), listed, required)


def check(public: str, accepts: Accepted, given: Mapping[str, str], forwarded: Mapping[str, str]) -> None:
    """Refuses what the client sent that the prompt does not take, then what it lacks once the gateway
    filled in defaults and fixed values (``forwarded``)."""
    if accepts.names is not None:
        unknown = [name for name in given if name not in accepts.names]
        if unknown:
            shown = ", ".join(accepts.listed[:MAX_NAMES_SAID]) or "none"
            if len(accepts.listed) > MAX_NAMES_SAID:
                shown += f" and {len(accepts.listed) - MAX_NAMES_SAID} more"
            raise InvalidParams(
                f"Invalid params: unknown argument {_said(unknown[0])} for prompt {public} (it takes: {shown})"
            )
    missing = [name for name in accepts.required if name not in forwarded]
    if missing:
        raise InvalidParams(
            f"Missing required argument{'s' if len(missing) > 1 else ''} for prompt {public}: "
            + ", ".join(missing[:MAX_NAMES_SAID])
        )


def _said(name: str) -> str:
    return repr(name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "…")
