"""A client's config strings in the gateway's syntax: each client's variables (VS Code's ``${input:id}``,
``${env:X}`` and workspace variables; Claude Code's shell-style ``${VAR:-default}``) become the gateway's
``${VAR}``, and a literal ``$`` is kept literal (``$$``). The inputs' variable names are chosen here so
that none is filled from the system's environment and no two inputs share one."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Set
from typing import Any

from gateway.transports.child_env import INHERITED

_EDITOR_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_SHELL_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORKSPACE = ("workspaceFolder", "workspaceRoot", "workspaceFolderBasename")
_ALWAYS_SET = frozenset({"HOME", "PATH"})
"""Variables every process has: the gateway needs them too, but nobody has to be told to set them."""
_THE_SYSTEMS = frozenset(INHERITED) | {
    *("PWD", "OLDPWD", "HOSTNAME", "TERM", "DISPLAY", "EDITOR", "VISUAL", "PAGER", "MAIL", "LANGUAGE"),
    *("COLUMNS", "LINES", "SHLVL", "TEMP", "TMP", "USERNAME", "USERPROFILE", "APPDATA", "LOCALAPPDATA"),
    *("SYSTEMROOT", "COMSPEC", "PATHEXT", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "NODE_OPTIONS", "NODE_PATH"),
}
"""Names the system, a shell or a runtime sets or reads: an input named ``path``, ``user`` or ``tz`` made
into ``${PATH}``, ``${USER}``, ``${TZ}`` was filled from the gateway's own environment (a tester's repository
path became the shell's PATH), and setting it as the note said would change the gateway's."""


class ClientVariables:
    """A client's string in the gateway's syntax: its variables translated, a literal ``$`` kept literal."""

    def __init__(
        self,
        style: str | None,
        inputs: Mapping[str, tuple[str, str | None]],
        workspace: str | None,
        variables: dict[str, str],
        warnings: list[str],
        input_names: dict[str, str],
        elsewhere: Set[str] = frozenset(),
    ) -> None:
        """``variables``: those the result needs, with what each stands for (added to); ``warnings``:
        said to the person (added to); ``input_names``: each input's variable, shared by a file's servers;
        ``elsewhere``: the variables the file's servers name otherwise (``variables_named``)."""
        self._style, self._inputs, self._workspace = style, inputs, workspace
        self._variables, self._warnings, self._input_names = variables, warnings, input_names
        self._elsewhere = elsewhere

    def __call__(self, value: str, where: str) -> str:
        if self._style == "editor":
            return self._editor(value, where)
        if self._style == "shell":
            return self._shell(value)
        return value.replace("$", "$$")

    def _shell(self, value: str) -> str:
        pieces, last = [], 0
        for match in _SHELL_VARIABLE.finditer(value):
            pieces.append(value[last : match.start()].replace("$", "$$"))
            pieces.append(match.group(0))  # ${VAR} and ${VAR:-default} mean the same to the gateway
            if match.group(2) is None and match.group(1) not in _ALWAYS_SET:
                self._variables.setdefault(match.group(1), "from the environment, as Claude Code read it")
            last = match.end()
        pieces.append(value[last:].replace("$", "$$"))
        return "".join(pieces)

    def _editor(self, value: str, where: str) -> str:
        pieces, last = [], 0
        for match in _EDITOR_VARIABLE.finditer(value):
            pieces.append(value[last : match.start()].replace("$", "$$"))
            pieces.append(self._editor_variable(match.group(1), match.group(0), where))
            last = match.end()
        pieces.append(value[last:].replace("$", "$$"))
        return "".join(pieces)

    def _editor_variable(self, inner: str, written: str, where: str) -> str:
        kind, _, name = inner.partition(":")
        if kind == "env" and _NAME.fullmatch(name):
            if name not in _ALWAYS_SET:
                self._variables.setdefault(name, "from the environment, as the client read it")
            return f"${{{name}}}"
        if kind == "input" and name:
            variable = self._input_variable(name)
            description, default = self._inputs.get(name, (f"the input {name!r}", None))
            if default is not None:  # the input's default stands where the variable is unset
                self._variables[variable] = f"{description} (default {default!r})"
                return f"${{{variable}:-{default.replace('}', '')}}}"  # a default is taken as written
            self._variables[variable] = description
            return f"${{{variable}}}"
        if inner == "userHome":
            return "${HOME}"
        if inner in ("pathSeparator", "/"):
            return "/"
        if inner in _WORKSPACE:
            if self._workspace is not None:
                folder = self._workspace.rstrip("/")
                return (folder.rsplit("/", 1)[-1] if inner == "workspaceFolderBasename" else folder).replace("$", "$$")
            self._variables["WORKSPACE_FOLDER"] = "the workspace folder (the file's own was not known)"
            return "${WORKSPACE_FOLDER}"
        self._warnings.append(f"{where}: {written} means nothing outside the editor: kept as text")
        return written.replace("$", "$$")

    def _input_variable(self, input_id: str) -> str:
        """The environment variable an input becomes: its id in capitals (``api-token``: ``API_TOKEN``);
        ``INPUT_`` before it where the system has a variable of that name (``path``: ``INPUT_PATH``), and a
        number after it where another input or variable of the file took it (``api-key`` and ``api_key``
        were one ``API_KEY``, one secret for two servers)."""
        if input_id in self._input_names:
            return self._input_names[input_id]
        base = re.sub(r"[^A-Za-z0-9]+", "_", input_id).strip("_").upper() or "INPUT"
        if base in _THE_SYSTEMS or base[0].isdigit():
            base = f"INPUT_{base}"
        taken = set(self._input_names.values()) | set(self._variables) | self._elsewhere
        variable, number = base, 2
        while variable in taken:
            variable, number = f"{base}_{number}", number + 1
        self._input_names[input_id] = variable
        return variable


def variables_named(servers: Mapping[str, Any], workspace: str | None) -> frozenset[str]:
    """The variables a file's servers (disabled ones too) name other than by an input: ``${env:X}``, and
    ``WORKSPACE_FOLDER`` where no workspace is known. An input takes none of them, whichever comes first
    (a reviewer: an input met before ``${env:API_KEY}`` took ``API_KEY``, and both servers got one value)."""
    named = set()
    for match in _EDITOR_VARIABLE.finditer(json.dumps(servers)):  # read as _editor_variable reads them
        kind, _, name = match.group(1).partition(":")
        if kind == "env" and _NAME.fullmatch(name):
            named.add(name)
        elif match.group(1) in _WORKSPACE and workspace is None:
            named.add("WORKSPACE_FOLDER")
    return frozenset(named)
