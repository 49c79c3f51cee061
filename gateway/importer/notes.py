"""What a person must look at in an imported server before the gateway runs it (sans-IO): values that are
placeholders copied from a README rather than real ones, and a bare ``python`` command.

A placeholder is told by its shape, never by guessing at what a real value looks like, so a real
secret is never flagged for what it contains by chance. A value holds one when it has

- a name in angle brackets: ``<YOUR_TOKEN>``, ``<api key>``, ``Bearer <token>``;
- a word starting ``YOUR_``/``YOUR-`` (any case): ``YOUR_API_KEY``, ``your-token-here``;
- three or more ``x`` standing alone or after a prefix: ``xxx``, ``sk-xxxxxxxx``, ``ghp_XXXX``;
- ``REPLACE_ME`` or ``CHANGE_ME`` (also with ``-`` or nothing between);
- a path through ``path/to/`` (any case): ``/path/to/server`` (Claude Code's documentation),
  ``/ABSOLUTE/PATH/TO/PARENT/FOLDER/weather.py`` (the MCP quickstart's), ``C:\\path\\to\\x``;
- an ellipsis (``...`` or ``…``): anywhere in an ``env`` or header value (``sk-...``), but in an
  argument, URL, command or folder only as the whole value (``./...`` is an argument Go tools take).

Where a variable stands (``${VAR}``) the value is the environment's, and is not looked at.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_ANYWHERE = re.compile(
    r"<[A-Za-z][\w .-]*>"
    r"|(?<![A-Za-z0-9])your[_-][A-Za-z0-9_-]+"
    r"|(?<![A-Za-z0-9])x{3,}(?![A-Za-z0-9])"
    r"|(?<![A-Za-z0-9])(?:replace|change)[_-]?me(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_PATH_TO = re.compile(r"(?<![A-Za-z0-9])path[/\\]to[/\\]", re.IGNORECASE)
_WORD = re.compile(r"[^\s\"']+")
_ELLIPSIS = re.compile(r"\.\.\.|…")
_VARIABLE = re.compile(r"\$\{[^}]*\}")
_BARE_PYTHON = re.compile(r"python(?:3(?:\.\d+)?)?(?:\.exe)?", re.IGNORECASE)


def placeholder(value: str, *, secret: bool) -> str | None:
    """The placeholder in ``value`` (as written), if it holds one; ``secret``: an ``env`` or header value."""
    text = _VARIABLE.sub(" ", value.replace("$$", "$"))
    found = _ANYWHERE.search(text)
    if found:
        return found.group(0)
    through = _PATH_TO.search(text)
    if through:  # the whole path it is part of: found first, so a long value is read once
        return next(w.group(0) for w in _WORD.finditer(text) if w.start() <= through.start() < w.end())
    if secret:
        dots = _ELLIPSIS.search(text)
        return dots.group(0) if dots else None
    return text.strip() if text.strip() in ("...", "…") else None


def _values(settings: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
    """Each string an upstream holds: where it is, the string, and whether it is a secret's place."""
    for key in ("command", "url", "cwd", "env_file"):
        if isinstance(settings.get(key), str):
            yield key, settings[key], False
    for number, arg in enumerate(settings.get("args", [])):
        yield f"args[{number}]", arg, False
    for table in ("env", "headers"):
        for key, value in settings.get(table, {}).items():
            yield f"{table}.{key}", value, True


def server_notes(settings: dict[str, Any]) -> list[str]:
    """What to tell the person about one imported server's settings, each a sentence."""
    notes = []
    for where, value, secret in _values(settings):
        found = placeholder(value, secret=secret)
        if found is not None:
            notes.append(f"{where} holds the placeholder {found!r}, not a value: fill it in (or use ${{VAR}})")
    command = settings.get("command")
    if isinstance(command, str) and _BARE_PYTHON.fullmatch(command):
        notes.append(
            f"command {command!r} is looked up on the gateway's PATH, not the client's: started from a virtual "
            "environment, the gateway runs that environment's Python, which may lack the server's packages; "
            "name the interpreter by its absolute path or run the server with uvx"
        )
    return notes
