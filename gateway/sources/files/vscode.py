"""VS Code's prompt files (``*.prompt.md``; by default in ``.github/prompts/``), read by the rules of VS
Code's documentation on prompt files as of 2026-12:

- Front matter (all optional): ``name`` (the slash command; else the file name), ``description``,
  ``argument-hint``, and ``agent``/``mode``, ``model``, ``tools``, which steer VS Code's own chat and mean
  nothing to an MCP client.
- ``${input:name}`` and ``${input:name:placeholder}`` ask the person for a value: each is an optional
  argument, the placeholder its description.
- VS Code's own variables (``${selection}``, ``${selectedText}``, ``${file}``, ``${fileBasename}``,
  ``${fileDirname}``, ``${fileBasenameNoExtension}``, ``${workspaceFolder}``,
  ``${workspaceFolderBasename}``) are optional arguments: what the editor would have filled in.
- What follows ``/name`` in VS Code's chat is sent with the prompt: here the optional argument
  ``arguments``, appended after the body.

An input or variable left out passes through as written (VS Code itself now leaves ``${input:...}`` to
the model to ask about); ``#tool:name``, ``#file:path`` and Markdown links pass through too. One
substitution pass: what a value contains reaches the model as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gateway.sources.files.common import Argument, FrontMatter, first_line, text_of

ARGUMENTS = "arguments"
BUILT_INS = {
    "selection": "the text selected in the editor",
    "selectedText": "the text selected in the editor",
    "file": "the path of the file open in the editor",
    "fileBasename": "the name of the file open in the editor",
    "fileDirname": "the directory of the file open in the editor",
    "fileBasenameNoExtension": "the name of the file open in the editor, without its extension",
    "workspaceFolder": "the path of the workspace folder",
    "workspaceFolderBasename": "the name of the workspace folder",
}
_VARIABLE = re.compile(r"\$\{(?:input:(?P<input>[A-Za-z0-9_.-]+)(?::(?P<placeholder>[^}]*))?|(?P<builtin>[A-Za-z]+))\}")


@dataclass(frozen=True)
class VsCodePrompt:
    body: str
    appends_arguments: bool

    def render_text(self, values: Mapping[str, str]) -> str:
        def substitute(match: re.Match[str]) -> str:
            name = match.group("input") or match.group("builtin")
            if match.group("builtin") is not None and name not in BUILT_INS:
                return match.group(0)
            value = values.get(name)
            return match.group(0) if value is None else value

        text = _VARIABLE.sub(substitute, self.body)
        extra = values.get(ARGUMENTS, "") if self.appends_arguments else ""
        return f"{text.rstrip()}\n\n{extra}" if extra.strip() else text


def read(front: FrontMatter) -> tuple[VsCodePrompt, str | None, tuple[Argument, ...]]:
    """The prompt, its description and its arguments, from a file's front matter and body."""
    found: dict[str, Argument] = {}
    for match in _VARIABLE.finditer(front.body):
        if match.group("input") is not None:
            placeholder = match.group("placeholder") or None  # left out, it passes through: never required
            found.setdefault(match.group("input"), Argument(match.group("input"), placeholder))
        elif match.group("builtin") in BUILT_INS:
            name = match.group("builtin")
            found.setdefault(name, Argument(name, BUILT_INS[name]))
    appends = ARGUMENTS not in found
    if appends:
        hint = text_of(front.meta, "argument-hint")
        found[ARGUMENTS] = Argument(ARGUMENTS, hint or "what you would type after the command in VS Code's chat")
    description = text_of(front.meta, "description") or first_line(front.body)
    return VsCodePrompt(front.body, appends), description, tuple(found.values())
