"""What a folder's scan says of files that were read otherwise than their author likely meant: templates
that use Claude Code's ``$ARGUMENTS``, and ``SKILL.md`` files no skills layout holds. Each is one note
for the folder (a collection holds dozens), naming the first few files and what to set."""

from __future__ import annotations

SHOWN = 3
"""How many files a note names before it counts the rest."""


def commands_note(sources: list[str]) -> str:
    """Templates that use ``$ARGUMENTS``, which a template serves as written (a tester's clone of a
    commands collection served 50 of them so, unsaid)."""
    return (
        f"{_listed(sources[:SHOWN], len(sources))}: {'uses' if len(sources) == 1 else 'use'} $ARGUMENTS, which "
        'a template serves as written (Claude Code commands? set format = "claude-code" on this upstream: '
        "docs/catalog.md)"
    )


def outside_note(first: list[str], count: int, skills_as: str) -> str:
    """``SKILL.md`` files no skills layout holds, where skills are asked for (a tester saw them vanish
    without a word under ``skills_as = "skills"``)."""
    served = "served as prompts only" if skills_as == "both" else "not served"
    return (
        f"{_listed(first, count)}: {served}: no skills layout holds {'it' if count == 1 else 'them'} "
        "(.claude/skills/<name>/, a plugin's skills/<name>/, or path set to a .claude/skills folder; see "
        "docs/skills.md)"
    )


def _listed(first: list[str], count: int) -> str:
    return ", ".join(first) + (f" and {count - len(first)} more" if count > len(first) else "")
