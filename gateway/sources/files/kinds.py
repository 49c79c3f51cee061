"""Which kind of prompt file a file is (a Jinja template, a Claude Code command or skill, a VS Code
prompt file), by its name, its place and what the directory holds: so ``prompts.py`` reads it as its tool
would and ``source.py`` knows which files of a directory to read.
"""

from __future__ import annotations

from typing import Literal

Kind = Literal["template", "claude-command", "vscode-prompt"]
Format = Literal["auto", "claude-code", "claude-plugin", "claude-skills", "vscode", "template"]
"""What a directory holds: ``auto`` tells each file's kind by its name and place; ``claude-plugin`` (a
Claude Code plugin: ``.claude-plugin/`` beside ``commands/`` and ``skills/``) is found by looking, and
``claude-skills`` (a ``.claude/skills`` folder itself, not a configurable format) by where it is."""


def kind_of(relative: str, directory_format: Format = "auto") -> Kind | None:
    """Which kind a file is, by its path relative to the directory and what the directory holds (None:
    not a prompt file). ``directory_format`` is the configured ``format``, or what ``format_of`` found."""
    parts = relative.split("/")
    if not parts[-1].endswith(".md"):
        return None
    if directory_format == "claude-plugin":  # its commands/ and skills/, nothing else
        if parts[0] == "commands" or (parts[0] == "skills" and parts[-1] == "SKILL.md" and len(parts) == 3):
            return "claude-command"
        return None
    if directory_format == "claude-skills":  # each skill's SKILL.md; its other files are its own, not prompts
        return "claude-command" if parts[-1] == "SKILL.md" and len(parts) >= 2 else None
    if directory_format != "auto":
        if directory_format == "vscode":
            return "vscode-prompt" if parts[-1].endswith(".prompt.md") else None
        return "claude-command" if directory_format == "claude-code" else "template"
    if parts[-1].endswith(".prompt.md"):
        return "vscode-prompt"
    if _under(parts, ".claude", "commands"):
        return "claude-command"
    if _under(parts, ".claude", "skills"):
        return "claude-command" if parts[-1] == "SKILL.md" and len(parts) >= 4 else None
    return "template"


def _under(parts: list[str], *folders: str) -> bool:
    return any(parts[i : i + len(folders)] == list(folders) for i in range(len(parts) - len(folders)))


def format_of(resolved_root: str) -> Format:
    """What a directory holds by where it is: inside ``.claude/commands`` (a project's or ``~/.claude``),
    Claude Code's commands; a ``.claude/skills`` folder, skills (only their ``SKILL.md`` files are
    prompts, as when the project around it is served); else each file by its own name and place."""
    parts = resolved_root.replace("\\", "/").split("/")
    if any(parts[i : i + 2] == [".claude", "commands"] for i in range(len(parts) - 1)):
        return "claude-code"
    if parts[-2:] == [".claude", "skills"]:  # (a folder inside it, one skill's, is read as any folder)
        return "claude-skills"
    return "auto"
