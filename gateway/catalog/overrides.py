"""Overrides: an upstream prompt as the operator wants it shown, sans I/O.

An override (``[upstreams.overrides.<upstream's name>]``) may give a prompt another public name, a
title, a description (replaced, or appended to), argument descriptions, defaults the gateway fills in
when the client leaves an argument out (the argument then lists as optional), fixed arguments the
gateway always sets and never lists (a client sending one is refused: it is not the client's to set),
icons and tags.

Tags live in a listed prompt's ``_meta`` under ``TAGS_META_KEY``. Only the gateway's own sources (prompt
files) and overrides set them: an upstream server's value under that key is dropped, since tags decide
what policy shows and an upstream does not get to vouch for its own prompts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from difflib import get_close_matches
from typing import Any

from gateway.config import PromptOverride
from gateway.protocol.errors import InvalidParams
from gateway.protocol.meta_keys import TAGS_META_KEY

MAX_TAGS = 64


def tags_of(entry: Mapping[str, Any], override: PromptOverride | None, *, own_tags: bool) -> tuple[str, ...]:
    """The prompt's tags: its source's (only a source of the gateway's own) and its override's."""
    found: list[str] = []
    if own_tags:
        meta = entry.get("_meta")
        listed = meta.get(TAGS_META_KEY) if isinstance(meta, Mapping) else None
        if isinstance(listed, Sequence) and not isinstance(listed, str):
            found.extend(tag for tag in list(listed)[:MAX_TAGS] if isinstance(tag, str))
    if override is not None:
        found.extend(override.tags)
    return tuple(dict.fromkeys(found))


def listed(
    entry: Mapping[str, Any], public: str, override: PromptOverride | None, tags: tuple[str, ...], *, own_tags: bool
) -> dict[str, Any]:
    """The listing entry a client sees: the upstream's, renamed and reshaped by the override."""
    shown = dict(entry)
    shown["name"] = public
    meta = entry.get("_meta")
    if isinstance(meta, Mapping) and TAGS_META_KEY in meta and not own_tags:
        kept = {k: v for k, v in meta.items() if k != TAGS_META_KEY}
        if kept:
            shown["_meta"] = kept
        else:
            del shown["_meta"]
    if override is None:
        return shown
    if tags:
        shown["_meta"] = {**(shown.get("_meta") or {}), TAGS_META_KEY: list(tags)}
    if override.title is not None:
        shown["title"] = override.title
    description = described(entry.get("description"), override)
    if description is not None:
        shown["description"] = description
    if override.icons is not None:
        shown["icons"] = [icon.listed() for icon in override.icons]
    if override.arguments or override.fixed:
        shown["arguments"] = _arguments_listed(entry.get("arguments"), override)
    return shown


def described(upstream: Any, override: PromptOverride) -> str | None:
    """The description after the override (None: the override leaves it as it was)."""
    if override.description is None and override.description_append is None:
        return None
    text = override.description if override.description is not None else upstream
    text = text if isinstance(text, str) else ""
    if override.description_append is not None:
        text = f"{text}\n\n{override.description_append}" if text else override.description_append
    return text


def _arguments_listed(arguments: Any, override: PromptOverride) -> list[Any]:
    out: list[Any] = []
    for argument in arguments if isinstance(arguments, list) else []:
        name = argument.get("name") if isinstance(argument, dict) else None
        if name in override.fixed:
            continue  # the gateway sets it: not the client's to see or send
        change = override.arguments.get(name) if isinstance(name, str) else None
        if change is not None:
            argument = dict(argument)
            if change.description is not None:
                argument["description"] = change.description
            if change.default is not None:
                argument["required"] = False
        out.append(argument)
    return out


def forwarded_arguments(public: str, override: PromptOverride | None, given: Mapping[str, str]) -> dict[str, str]:
    """The arguments sent upstream: the client's, with defaults filled in and fixed ones set. A client
    value for a fixed argument is refused (-32602), never silently replaced."""
    if override is None:
        return dict(given)
    _refuse_fixed(public, override, given)
    arguments = {name: change.default for name, change in override.arguments.items() if change.default is not None}
    arguments.update(given)
    arguments.update(override.fixed)
    return arguments


def forwarded_completion(public: str, override: PromptOverride | None, params: Mapping[str, Any]) -> dict[str, Any]:
    """A ``completion/complete`` as sent upstream: completing a fixed argument is refused, and the context
    gains the fixed values (the upstream completes knowing what it will receive: a city given the fixed
    country). A client that sends context values for fixed arguments is refused, as in a get."""
    if override is None or not override.fixed:
        return dict(params)
    argument = params.get("argument")
    name = argument.get("name") if isinstance(argument, Mapping) else None
    if name in override.fixed:
        raise InvalidParams(f"Invalid params: argument {name} of prompt {public} is set by the gateway")
    context = params.get("context")
    context = context if isinstance(context, Mapping) else {}
    given = context.get("arguments")
    given = given if isinstance(given, Mapping) else {}
    _refuse_fixed(public, override, given)
    return {**params, "context": {**context, "arguments": {**given, **override.fixed}}}


def _refuse_fixed(public: str, override: PromptOverride, given: Mapping[str, Any]) -> None:
    sent = sorted(name for name in given if name in override.fixed)
    if sent:
        raise InvalidParams(
            f"Invalid params: argument {sent[0]} of prompt {public} is set by the gateway; leave it out"
        )


def rendered(result: dict[str, Any], override: PromptOverride | None) -> dict[str, Any]:
    """A ``prompts/get`` result with the description the listing shows."""
    if override is None or "description" not in result:
        return result
    description = described(result.get("description"), override)
    return result if description is None else {**result, "description": description}


def unmatched(index: Mapping[str, Mapping[str, Any]], by_name: Mapping[str, PromptOverride]) -> list[str]:
    """What of an upstream's overrides names nothing it lists: a prompt it does not have, an argument its
    prompt does not declare (``fixed`` one is still sent, and a strict server refuses every get). A
    tester's three typos were taken without a word; the config's promise is that a typo never is."""
    notes = []
    for local, override in by_name.items():
        entry = index.get(local)
        if entry is None:
            notes.append(f"the override of {local!r} names no prompt this upstream lists{_did_you_mean(local, index)}")
            continue
        declared = entry.get("arguments")
        arguments = declared if isinstance(declared, list) else []
        names: list[str] = [a["name"] for a in arguments if isinstance(a, Mapping) and isinstance(a.get("name"), str)]
        for kind, given in (("fixed argument", override.fixed), ("argument", override.arguments)):
            notes += [
                f"the override of {local!r}: {kind} {argument!r} is none the prompt declares"
                + _did_you_mean(argument, names)
                for argument in given
                if argument not in names
            ]
    return notes


def _did_you_mean(word: str, known: Iterable[str]) -> str:
    close = get_close_matches(word, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
