"""What the prompt-file formats share: arguments as listed, front matter read as the tools read it
(leniently: a file their tool serves is never refused for its front matter), names made into valid
prompt names, and a description taken from the first line where the file gives none."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

MAX_NAME_CHARS = 128
MAX_DESCRIPTION_CHARS = 300
YAML_ERRORS = (yaml.YAMLError, ValueError)
"""What loading YAML raises on a bad document: ValueError for an integer past Python's 4300 digits or a
YAML 1.1 form under an explicit tag (``!!int 0b11`` to the skills' YAML 1.2 reader)."""

FRONT_MATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)^---[ \t]*\r?\n?", re.DOTALL | re.MULTILINE)
_LENIENT_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:[ \t]*(.*?)[ \t]*$")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")


@dataclass(frozen=True)
class Argument:
    name: str
    description: str | None = None
    required: bool = False
    default: str | None = None
    values: tuple[str, ...] = ()

    def as_listed(self) -> dict[str, Any]:
        listed: dict[str, Any] = {"name": self.name, "required": self.required and self.default is None}
        if self.description:
            listed["description"] = self.description
        return listed


@dataclass(frozen=True)
class FrontMatter:
    meta: dict[str, Any]
    body: str
    body_line: int  # the body's first line in the file
    problem: str | None = None  # what was wrong with it, when it could be read only leniently


def lenient_front_matter(text: str) -> FrontMatter:
    """The front matter as YAML; where it is not valid YAML (``argument-hint: [a] [b]``, an unquoted
    colon), each ``key: value`` line as text, which is how the tools still read such a file."""
    match = FRONT_MATTER.match(text)
    if match is None:
        return FrontMatter({}, text.removeprefix("\ufeff"), 1)
    body, body_line = text[match.end() :], text[: match.end()].count("\n") + 1
    try:
        meta = yaml.safe_load(match.group(1))
    except YAML_ERRORS as exc:
        lines = (_LENIENT_LINE.match(line) for line in match.group(1).splitlines())
        found = {m.group(1): _value_of(m.group(2)) for m in lines if m is not None and m.group(2)}
        return FrontMatter(
            found, body, body_line, f"front matter is not valid YAML ({_problem(exc)}): read line by line"
        )
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        return FrontMatter({}, body, body_line, "front matter is not a mapping of keys to values: ignored")
    return FrontMatter({str(k): v for k, v in meta.items()}, body, body_line)


def _value_of(value: str) -> Any:
    """One front-matter line's value: YAML where it is (``[a, b]`` a list), else its text."""
    try:
        parsed = yaml.safe_load(value)
    except YAML_ERRORS:
        return _unquoted(value)
    return parsed if parsed is not None else _unquoted(value)


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _problem(exc: yaml.YAMLError | ValueError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 2}: " if mark is not None else ""
    return f"{where}{getattr(exc, 'problem', None) or exc}"


def as_text(value: Any) -> str | None:
    """A front-matter value as the text a tool shows: a list as its items in brackets (``[message]``
    is YAML for a list, and Claude Code's own examples write ``argument-hint: [message]``)."""
    if value is None or value == "":
        return None
    if isinstance(value, list):
        return " ".join(f"[{as_text(item) or ''}]" for item in value) or None
    if isinstance(value, dict):
        return ", ".join(f"{k}: {as_text(v) or ''}" for k, v in value.items()) or None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def as_names(value: Any) -> tuple[str, ...]:
    """A list of names: a YAML list, or one string of names separated by spaces or commas."""
    if isinstance(value, str):
        items: list[Any] = re.split(r"[\s,]+", value.strip())
    elif isinstance(value, list):
        items = [item.get("name") if isinstance(item, dict) else item for item in value]
    else:
        return ()
    return tuple(dict.fromkeys(str(item) for item in items if isinstance(item, (str, int)) and str(item)))


def valid_name(wanted: str) -> str:
    """A prompt name made of what ``wanted`` says: letters, digits, ``_``, ``-``, ``.`` (``Apple App
    Store Reviewer`` → ``Apple-App-Store-Reviewer``, ``svelte:a11y`` → ``svelte-a11y``)."""
    folded = unicodedata.normalize("NFKD", wanted)
    ascii_only = "".join(ch for ch in folded if not unicodedata.combining(ch))
    name = re.sub(r"-{2,}", "-", _NOT_NAME.sub("-", ascii_only)).strip("-.")[:MAX_NAME_CHARS].strip("-.")
    return name or "prompt"


def first_line(body: str) -> str | None:
    """The body's first line of text, as a description (Claude Code's own default), headings unmarked."""
    for line in body.splitlines():
        text = _HEADING.sub("", line).strip()
        if text and not text.startswith("<!--"):
            return text[:MAX_DESCRIPTION_CHARS]
    return None


def text_of(meta: Mapping[str, Any], key: str) -> str | None:
    return as_text(meta.get(key))
