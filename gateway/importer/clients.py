"""The MCP server lists of the clients people run, read as each client reads its own file (sans-IO):
Claude Desktop, Claude Code (``.mcp.json``, and ``~/.claude.json``: the user's servers and, under
``projects``, each project's own, where ``claude mcp add`` puts a server by default), Cursor, Windsurf
(``mcpServers``), VS Code (``servers`` in ``mcp.json``, ``mcp.servers`` in ``settings.json``, with
``inputs``) and Zed (``context_servers``).

Files are JSON with comments and trailing commas (VS Code's own documentation writes them so), read
with json5. Each client's variables are turned into what the gateway's config means by them, or named
where they cannot be: VS Code's ``${input:id}`` becomes an environment variable the result names (the
gateway prompts nobody), ``${env:X}`` becomes ``${X}``, ``${userHome}`` ``${HOME}``, and
``${workspaceFolder}`` the workspace the file sits in (its ``.vscode``/``.cursor`` folder's parent) when
that is known; Claude Code's ``${VAR}`` and ``${VAR:-default}`` are the gateway's own syntax. The
result is plain data: ``writer.py`` writes it as TOML.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import PurePath
from typing import Any, Literal

import json5

from gateway.importer.variables import ClientVariables, variables_named
from gateway.protocol.errors import ConfigError

ClientFormat = Literal["auto", "claude-desktop", "claude-code", "cursor", "windsurf", "vscode", "zed"]
CLIENT_FORMATS: tuple[ClientFormat, ...] = (
    "auto",
    "claude-desktop",
    "claude-code",
    "cursor",
    "windsurf",
    "vscode",
    "zed",
)
_SECTIONS: dict[str, tuple[tuple[str, ...], ...]] = {
    "claude-desktop": (("mcpServers",),),
    "claude-code": (("mcpServers",),),
    "cursor": (("mcpServers",),),
    "windsurf": (("mcpServers",),),
    "vscode": (("servers",), ("mcp", "servers")),
    "zed": (("context_servers",),),
}
_SECTION_CLIENT = {
    ("mcpServers",): "claude-desktop",
    ("servers",): "vscode",
    ("mcp", "servers"): "vscode",
    ("context_servers",): "zed",
}
_INTERPOLATES = {"vscode": "editor", "cursor": "editor", "windsurf": "editor", "claude-code": "shell"}
"""How a client expands variables in its file: VS Code's ``${...}`` (also Cursor's and Windsurf's), a
shell's ``${VAR:-default}`` (Claude Code), or not at all (Claude Desktop, Zed: a ``$`` is a ``$``)."""
_HTTP_TYPES = {"http": "streamable-http", "streamable-http": "streamable-http", "streamableHttp": "streamable-http"}


@dataclass
class ClientServer:
    """One server as the gateway will run it, before it is written as TOML. String values hold the
    gateway's own ``${VAR}`` (and ``$$`` for a literal ``$``)."""

    name: str
    settings: dict[str, Any]
    disabled: bool = False
    """Turned off in the client (``"disabled": true``, Zed's ``"enabled": false``): written commented out."""
    needs: tuple[str, ...] = ()
    """For a disabled one, the variables it would need once turned on (not asked for meanwhile)."""
    notes: tuple[str, ...] = ()
    """What the client's entry says that the settings cannot (it signs in to the server itself)."""


@dataclass
class ClientConfig:
    client: str
    servers: list[ClientServer] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)
    """Environment variables the result needs, with what they stand for (an input's description)."""
    warnings: list[str] = field(default_factory=list)


def client_of(path: str) -> tuple[ClientFormat, str | None]:
    """The client a config file belongs to by its name and place, and the project folder it is in (for
    a project's own file: ``.mcp.json``, ``.vscode/mcp.json``, ``.cursor/mcp.json``); ``auto`` where the
    name says nothing, and the file's shape decides."""
    parts = path.replace("\\", "/").split("/")
    name, parent = parts[-1], parts[-2] if len(parts) > 1 else ""
    project = "/".join(parts[:-2]) or "/" if parent in (".vscode", ".cursor") else None
    lowered = [part.lower() for part in parts]
    if name == "claude_desktop_config.json":
        return "claude-desktop", None
    if name == ".mcp.json":
        return "claude-code", "/".join(parts[:-1]) or "/"
    if name == ".claude.json":
        return "claude-code", None
    if parent == ".cursor":
        return "cursor", project
    if parent == ".vscode" or (name in ("mcp.json", "settings.json") and "code" in lowered[-4:-1]):
        return "vscode", project
    if name == "mcp_config.json" and any("windsurf" in part or part == ".codeium" for part in lowered):
        return "windsurf", None
    if name == "settings.json" and "zed" in lowered:
        return "zed", None
    return "auto", project


def read_client_config(
    text: str, client: ClientFormat = "auto", *, workspace: str | None = None, project: str | None = None
) -> ClientConfig:
    """The servers of a client's config file. ``workspace``: the folder ``${workspaceFolder}`` means;
    ``project``: the folder a project's own file belongs to, where its servers start (as the client
    starts them) unless they name a ``cwd``."""
    try:
        document = json5.loads(text)
    except ValueError as exc:
        raise ConfigError(f"not valid JSON (comments and trailing commas are fine): {exc}") from exc
    if not isinstance(document, dict):
        raise ConfigError("the file holds no JSON object")
    section: tuple[str, ...]
    projects = document.get("projects") if client in ("auto", "claude-code") else None
    if isinstance(projects, dict) and isinstance(document.get("mcpServers", {}), dict):
        found, section = "claude-code", ("mcpServers",)
        result = ClientConfig(found)
        servers = _claude_code_scopes(document, projects, workspace, result)
    else:
        section, servers = _find_servers(document, client)
        found = _SECTION_CLIENT[section] if client == "auto" else client
        result_warnings = []
        if client not in ("auto", "claude-code") and isinstance(document.get("projects"), dict):
            result_warnings.append(
                f'the file looks like Claude Code\'s ~/.claude.json (it has "projects"), read as {client}: only '
                "its top-level servers were imported; import it with --from claude-code to see its projects' too"
            )
        if found == "claude-desktop" and client == "auto":
            found = _client_by_shape(servers)
        result = ClientConfig(found, warnings=result_warnings)
    inputs = _inputs(document, section)
    input_names: dict[str, str] = {}  # each input's variable, chosen once for every server of the file
    elsewhere = variables_named(servers, workspace)
    for name, spec in servers.items():
        if not isinstance(spec, dict):
            continue
        if _is_this_gateway(spec):
            result.warnings.append(
                f"{name}: this is prompt-gateway itself: left out (a gateway among its own servers would start "
                "itself again, without end); point the client at the gateway instead of importing it"
            )
            continue
        disabled = spec.get("disabled") is True or spec.get("enabled") is False
        into = ClientConfig(found) if disabled else result  # a disabled server asks for no variable
        notes: list[str] = []
        variables = ClientVariables(
            _INTERPOLATES.get(found), inputs, workspace, into.variables, into.warnings, input_names, elsewhere
        )
        settings = _server(str(name), spec, found, variables, into, notes)
        if settings is not None and settings["transport"] == "stdio" and project is not None:
            settings.setdefault("cwd", project.replace("$", "$$"))
        if disabled:
            result.warnings += into.warnings
        if settings is not None:
            needs = tuple(sorted(into.variables)) if disabled else ()
            result.servers.append(ClientServer(str(name), settings, disabled, needs, tuple(notes)))
    return result


def _find_servers(document: Mapping[str, Any], client: ClientFormat) -> tuple[tuple[str, ...], dict[str, Any]]:
    candidates = _SECTIONS[client] if client != "auto" else tuple(_SECTION_CLIENT)
    for path in candidates:
        node: Any = document
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and node:
            return path, node
    wanted = " or ".join('"' + ".".join(p) + '"' for p in candidates)
    present = ", ".join(f'"{k}"' for k in list(document)[:8]) or "nothing"
    raise ConfigError(f"no {wanted} object with servers found (the file has {present})")


def _claude_code_scopes(
    document: Mapping[str, Any], projects: Mapping[str, Any], workspace: str | None, result: ClientConfig
) -> dict[str, Any]:
    """The servers Claude Code starts in ``workspace`` from ``~/.claude.json``: the user's own (top-level
    ``mcpServers``) and that project's (``projects.<path>.mcpServers``, the default scope of ``claude mcp
    add``), the project's winning a shared name as in Claude Code. Other projects' servers are named in
    a warning rather than dropped without a word (they were, and a file with only those was refused as
    holding no servers)."""
    servers: dict[str, Any] = dict(document.get("mcpServers") or {})
    wanted = (workspace.rstrip("/") or "/") if workspace else None
    others: list[str] = []
    turned_off: list[Any] = []
    for path, project in projects.items():
        local = project.get("mcpServers") if isinstance(project, dict) else None
        mine = (str(path).rstrip("/") or "/") == wanted
        if mine and isinstance(project, dict) and isinstance(project.get("disabledMcpServers"), list):
            turned_off = project["disabledMcpServers"]  # `/mcp disable NAME` in that project
        if not isinstance(local, dict) or not local:
            continue
        if mine:
            servers.update(local)
        else:
            others.append(f"{path} ({', '.join(map(str, local))})")
    for name in turned_off:
        if isinstance(name, str) and isinstance(servers.get(name), dict):
            servers[name] = {**servers[name], "disabled": True}  # imported as the project has it: turned off
    unknown = wanted is not None and not any((str(p).rstrip("/") or "/") == wanted for p in projects)
    how = "pass --workspace PROJECT_FOLDER to import that project's servers" + (
        f" ({wanted} is none of them)" if unknown else ""
    )
    if unknown and servers:
        result.warnings.append(
            f"--workspace {wanted}: the file has no project of that folder, so only your own servers "
            '("mcpServers") were imported; a project is known by the folder Claude Code was started in'
        )
    if others and not servers:
        only = "; ".join(others)
        raise ConfigError(
            f'no servers of your own ("mcpServers") in the file, only projects\' (local scope): {only}: {how}'
        )
    if others:
        result.warnings.append(f"projects' own servers (local scope) not imported: {'; '.join(others)}")
        if not unknown:
            result.warnings.append(f"{how} as well")
    if not servers:
        raise ConfigError('no servers in the file: neither your own ("mcpServers") nor any project\'s')
    return servers


_GATEWAY_PACKAGE = re.compile(r"^mcp-prompt-gateway(?:[\[=<>~!@].*)?$")
"""The package as ``uvx``, ``pipx run`` or ``pip`` would be given it, with extras or a version."""


def _is_this_gateway(spec: Mapping[str, Any]) -> bool:
    """A client already pointed at the gateway: its ``prompt-gateway`` command (any path), or the package
    run by ``uvx``/``pipx run`` or ``python -m gateway``."""
    command, args = spec.get("command"), spec.get("args")
    words = [command, *(args if isinstance(args, list) else [])]
    names = [PurePath(w).name for w in words if isinstance(w, str)]
    if "prompt-gateway" in names or any(_GATEWAY_PACKAGE.match(n) for n in names):
        return True
    return any(a == "-m" and b == "gateway" for a, b in pairwise(names))


def _client_by_shape(servers: Mapping[str, Any]) -> ClientFormat:
    """Which client wrote an ``mcpServers`` file its name and place do not tell: Windsurf's alone say
    ``serverUrl``; an editor's ``${env:X}``, ``${userHome}`` or ``${workspaceFolder}`` is Cursor's (or
    Windsurf's, which expands them alike), even beside a ``type``; Claude Code's ``.mcp.json`` names each
    server's ``type`` (and expands ``${VAR}``); else Claude Desktop's, which expands nothing. (A tester's
    Windsurf file saved elsewhere was read as Claude Desktop's: its ``${env:WS_TOKEN}`` went into the
    config as that text, sent as the header.)"""
    specs = [s for s in servers.values() if isinstance(s, dict)]
    if any("serverUrl" in s for s in specs):
        return "windsurf"
    text = json.dumps(specs)
    if any(variable in text for variable in _EDITOR_ONLY):  # (before type: Claude Code writes none of these)
        return "cursor"
    if any(s.get("type") in ("stdio", "http", "sse") for s in specs):
        return "claude-code"
    return "claude-desktop"


_EDITOR_ONLY = ("${env:", "${userHome}", "${workspaceFolder}")
"""Variables only the editors expand (Cursor, Windsurf, VS Code): a file using them was written for one."""


def _inputs(document: Mapping[str, Any], section: tuple[str, ...]) -> dict[str, tuple[str, str | None]]:
    holder = document.get("mcp") if section == ("mcp", "servers") else document
    inputs = holder.get("inputs") if isinstance(holder, dict) else None
    found: dict[str, tuple[str, str | None]] = {}
    for item in inputs if isinstance(inputs, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            default = item.get("default")  # a pickString's default, or a promptString's
            shown = str(default) if isinstance(default, (str, int, float)) and not isinstance(default, bool) else None
            found[item["id"]] = (str(item.get("description") or item["id"]), shown)
    return found


def _server(
    name: str, spec: Mapping[str, Any], client: str, text: ClientVariables, result: ClientConfig, notes: list[str]
) -> dict[str, Any] | None:
    url = spec.get("url", spec.get("serverUrl"))
    if isinstance(url, str):
        declared = spec.get("type", spec.get("transport"))
        if declared == "sse":
            transport = "sse"
        elif declared in _HTTP_TYPES:
            transport = _HTTP_TYPES[declared]
        elif declared is None and re.search(r"/sse/?$", url.split("?", 1)[0]):
            transport = "sse"  # Cursor and Windsurf take a bare url and find out; an /sse path is SSE
            result.warnings.append(f"{name}: {url} ends in /sse: imported as a legacy HTTP+SSE server")
        elif declared is None:
            transport = "streamable-http"
        else:
            result.warnings.append(f"{name}: unknown type {declared!r}: left out")
            return None
        settings: dict[str, Any] = {"transport": transport, "url": text(url, f"{name}.url")}
        if isinstance(spec.get("headers"), dict) and spec["headers"]:
            settings["headers"] = {str(k): text(str(v), f"{name}.headers.{k}") for k, v in spec["headers"].items()}
        elif isinstance(spec.get("oauth"), dict) or spec.get("headersHelper") or "auth" in spec:
            notes.append(
                "the client signs in to this server itself (OAuth in a browser, or a helper command): the "
                "gateway cannot; give it a token under headers, or its own client credentials under oauth "
                "(docs/configuration.md), or it will be refused (401)"
            )
        else:
            notes.append(
                "a remote server with no headers: if it asks for a sign-in (401, OAuth), the gateway cannot "
                "sign in the way the client does; give it a token under headers or client credentials under oauth"
            )
        return settings
    command, args, env = spec.get("command"), spec.get("args"), spec.get("env")
    if isinstance(command, dict):  # Zed's older shape: "command": {"path", "args", "env"}
        nested: dict[str, Any] = command
        command, args, env = nested.get("path"), nested.get("args", args), nested.get("env", env)
    if not isinstance(command, str) or not command:
        result.warnings.append(f"{name}: neither a command nor a url: left out")
        return None
    settings = {"transport": "stdio", "command": text(command, f"{name}.command")}
    if isinstance(args, list) and args:
        settings["args"] = [text(str(a), f"{name}.args") for a in args]
    if isinstance(env, dict) and env:
        settings["env"] = {str(k): text(str(v), f"{name}.env.{k}") for k, v in env.items()}
    if isinstance(spec.get("cwd"), str):
        settings["cwd"] = text(spec["cwd"], f"{name}.cwd")
    if isinstance(spec.get("envFile"), str):
        settings["env_file"] = text(spec["envFile"], f"{name}.envFile")
    return settings
