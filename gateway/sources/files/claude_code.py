"""Claude Code's command files (``.claude/commands/**/*.md``) and skills (``.claude/skills/<name>/SKILL.md``),
read by the rules of Claude Code's documentation on skills and slash commands as of 2026-12 (commands
and skills "are loaded identically"):

- ``$ARGUMENTS`` is everything typed after the command, as typed.
- ``$ARGUMENTS[N]`` and its shorthand ``$N`` are the N-th argument, **0-based**, the arguments split
  shell-style (quotes group words and are removed; unbalanced quotes fall back to splitting on
  whitespace). ``$N`` is one only where no letter, digit or ``_`` follows (``$1abc`` is text). One that
  receives no word is left as written: so ``$5,000``, ``$100``, ``awk '{print $4}'`` and SQL's ``$3``
  keep their text.
- ``$name`` is a named argument when the front matter lists ``arguments`` (a YAML list, or names
  separated by spaces), mapped to the positions in order; one followed by a letter, digit, ``_`` or
  ``[`` is not.
- When none of these received anything (no ``$ARGUMENTS``, no named argument, no ``$N`` that had a
  word) and arguments are given, they are appended as ``ARGUMENTS: <value>``.
- A backslash before ``$`` and a digit, ``ARGUMENTS`` or a named argument escapes it: the backslash is
  dropped and the rest is text (``\\$ARGUMENTS`` is ``$ARGUMENTS``); a doubled backslash escapes nothing.

These are the rules of Claude Code 2.1.332's own substitution (read from its published build, December
2026), not only of its documentation, which leaves the last two unsaid.

Substitution is one pass: what a value contains (``$5``, ``$1``, ``$ARGUMENTS``) reaches the model as it
is. What only Claude Code itself can resolve passes through untouched: ``!`command``` (never run here),
``@file`` references, ``${CLAUDE_SESSION_ID}``, ``${CLAUDE_SKILL_DIR}``, ``${CLAUDE_EFFORT}``.

The front matter's ``description`` is the description (else the body's first line, Claude Code's
default) and ``argument-hint`` describes the arguments; the other keys (``allowed-tools``, ``model``,
``disable-model-invocation``...) steer Claude Code and mean nothing to an MCP client.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from gateway.sources.files.common import Argument, FrontMatter, as_names, first_line, text_of

ARGUMENTS = "arguments"
"""The MCP argument holding what a person would type after the command."""
_NAMED = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_WORD = "A-Za-z0-9_"
"""What may not follow ``$N`` or ``$name`` (JavaScript's ASCII ``\\w``, which Claude Code's patterns use)."""
_BUILT_IN = rf"ARGUMENTS\[(?P<index>[0-9]+)\]|(?P<short>[0-9]+)(?![{_WORD}])|ARGUMENTS"


@dataclass(frozen=True)
class ClaudeCommand:
    """One command's body and how arguments fill it in."""

    body: str
    names: tuple[str, ...] = ()

    @property
    def _placeholder(self) -> re.Pattern[str]:
        named = "|".join(re.escape(n) for n in sorted(self.names, key=len, reverse=True))
        name_form = rf"(?:{named})(?![\[{_WORD}])" if named else None
        forms = (rf"(?P<name>{name_form})|" if name_form else "") + _BUILT_IN
        escapable = "[0-9]|ARGUMENTS" + (f"|{name_form}" if name_form else "")
        return re.compile(rf"(?P<escaped>(?<!\\)\\\$(?={escapable}))|\$(?:{forms})")

    def arguments(self, hint: str | None) -> tuple[Argument, ...]:
        """What an MCP client is offered: each named argument (described by its part of the hint, when
        the hint has one bracketed part per name), or the one ``arguments`` text."""
        if self.names:
            parts = re.findall(r"\[([^\]]*)\]", hint or "")
            described = parts if len(parts) == len(self.names) else [None] * len(self.names)
            return tuple(Argument(name, part) for name, part in zip(self.names, described, strict=True))
        return (Argument(ARGUMENTS, hint or "what follows the command, as you would type it", default=""),)

    def render_text(self, values: Mapping[str, str]) -> str:
        if self.names:
            words = [values.get(name, "") for name in self.names]
            while words and not words[-1]:
                words.pop()
            raw = " ".join(shlex.quote(w) if not w or any(c.isspace() for c in w) else w for w in words)
        else:
            raw = values.get(ARGUMENTS, "")
            words = split_arguments(raw)
        named = dict(zip(self.names, words, strict=False))
        received = False

        def substitute(match: re.Match[str]) -> str:
            nonlocal received
            if match.group("escaped") is not None:
                return "$"  # what follows is text: the scan goes on after the dollar
            if match.group("index") is not None or match.group("short") is not None:
                index = int(match.group("index") or match.group("short"))
                if index >= len(words):
                    return match.group(0)  # no word for it: a price, an awk field, a SQL parameter
                received = True
                return words[index]
            received = True
            if match.groupdict().get("name") is not None:
                return named.get(match.group("name"), "")
            return raw

        text = self._placeholder.sub(substitute, self.body)
        if raw.strip() and not received:
            text = f"{text.rstrip()}\n\nARGUMENTS: {raw}"
        return text

    def hint_note(self, hint: str | None) -> str | None:
        """A warning when the hint names words the body drops: each ``$N`` counts from 0, so a body
        written for ``$1 $2 $3`` (as an often copied example is) under a hint of three parts never
        uses the first word typed, and ``$3`` receives none. Said only where it happens: positions
        used, and some receiving a word (else everything typed is appended), and no ``$ARGUMENTS``."""
        parts = len(re.findall(r"\[[^\]]*\]", hint or ""))
        if self.names or not parts:
            return None
        used: set[int] = set()
        for match in self._placeholder.finditer(self.body):
            if match.group("escaped") is not None:
                continue
            position = match.group("index") or match.group("short")
            if position is None:
                return None  # $ARGUMENTS: everything typed reaches the body
            used.add(int(position))
        if not any(p < parts for p in used):
            return None
        dropped = [p for p in range(parts) if p not in used]
        if not dropped:
            return None
        words = ", ".join(f"${p}" for p in dropped)
        uses = " ".join(f"${p}" for p in sorted(used))
        lost = "that word is" if len(dropped) == 1 else "those words are"
        return (
            f"argument-hint {hint!r} has {parts} bracketed parts but the body never uses {words} (it uses {uses}): "
            f"$N counts from 0 ($0 is the first word typed), so {lost} dropped"
        )


def split_arguments(raw: str) -> list[str]:
    """Shell-style words (quotes group and are removed); plain whitespace where the quoting is broken."""
    try:
        return shlex.split(raw)
    except ValueError:
        return raw.split()


def read(front: FrontMatter) -> tuple[ClaudeCommand, str | None, tuple[Argument, ...]]:
    """The command, its description and its arguments, from a file's front matter and body."""
    names = tuple(n for n in as_names(front.meta.get("arguments")) if _NAMED.match(n))
    command = ClaudeCommand(front.body, names)
    description = text_of(front.meta, "description") or first_line(front.body)
    return command, description, command.arguments(text_of(front.meta, "argument-hint"))
