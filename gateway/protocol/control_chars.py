"""Characters that steer a display instead of showing on it, in text that came from elsewhere (an
upstream's prompt names and descriptions, a file's name, an issuer's key ids): ``ESC`` and ``BEL`` make
up the sequences that set a terminal's title or clear its screen, C1 controls (``U+009B`` is ``ESC [``
to many terminals) do the same in one character, bidirectional overrides (``U+202E``) make a name read
as another, line and paragraph separators start a line that was not there, and a lone surrogate cannot
even be written out as UTF-8.

The catalog refuses names holding any of them (``has_control_chars``); every human-readable output of
the command line shows them escaped (``escaped``), as does its JSON (``json_text``), still valid JSON
of the same value. Sans-IO.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
"""Controls (C0, C1, DEL), format characters (bidirectional marks and overrides, zero-width joiners and
spaces), line and paragraph separators, and surrogates. Spaces and private-use glyphs are shown as they
are: they move no cursor."""

_CANDIDATES = re.compile(r"[^\x20-\x7e\u00a0-\u05ff]")
"""The characters worth looking up: printable ASCII and Latin to Hebrew never need escaping (except the
soft hyphen, a format character, which the lookup below catches), so plain text passes at regex speed."""


def _is_control(ch: str) -> bool:
    return unicodedata.category(ch) in CONTROL_CATEGORIES


def has_control_chars(text: str) -> bool:
    """Whether ``text`` holds a character that steers a display (the categories above)."""
    return "\u00ad" in text or any(_is_control(m.group()) for m in _CANDIDATES.finditer(text))


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _python_escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escaped(text: str, *, lines: bool = False) -> str:
    """``text`` with each control character written as Python writes it (``\\x1b``, ``\\u202e``), so it
    shows instead of acting; with ``lines``, line breaks and tabs stay (a prompt's body, a message)."""
    if text.isprintable():  # the common case: no copy
        return text
    keep = "\n\t" if lines else ""
    return "".join(_python_escape(ch) if ch not in keep and (ch == "\u00ad" or _is_control(ch)) else ch for ch in text)


def _json_escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch != "\u00ad" and not _is_control(ch):
        return ch
    return json.dumps(ch)[1:-1]  # \u001b, or a surrogate pair for a character beyond the BMP


def json_text(value: Any, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)`` with every control character left escaped:
    ``json`` escapes only C0 controls, and a C1 control or an override in a string would act on the
    terminal. Line breaks outside strings (indentation) are the document's own and stay."""
    text = json.dumps(value, ensure_ascii=False, **options)
    return re.sub(r"[^\n\x20-\x7e\u00a0-\u05ff]|\u00ad", _json_escape, text)
