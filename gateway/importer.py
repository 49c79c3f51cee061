"""``prompt-gateway import``: an existing client's ``mcpServers`` JSON (Claude Desktop, Cursor) or
``servers`` JSON (VS Code) turned into this gateway's TOML config.

The output is parsed back and validated before it is printed, so what ``import`` writes always loads.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from typing import Any

from gateway.config import parse_config
from gateway.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

_VSCODE_ENV = re.compile(r"\$\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_HTTP_TYPES = {
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "streamableHttp": "streamable-http",
    "sse": "sse",
}


def _string(value: str) -> str:
    """A TOML basic string (JSON's string escapes are valid TOML). A literal ``$`` is escaped as ``$$`` so the
    gateway does not expand it; only VS Code's ``${env:X}`` becomes the gateway's ``${X}``."""
    return json.dumps(_VSCODE_ENV.sub(r"${\1}", value.replace("$", "$$")), ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_string(str(k))} = {_value(v)}" for k, v in value.items()) + " }"
    raise ConfigError(f"cannot express {value!r} in TOML")


def _namespace(name: str, taken: set[str], separator: str) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-_") or "server"
    base = base.replace(separator, "-").strip(separator[:1]).strip(separator[-1:]) or "server"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}-{n}", n + 1
    taken.add(candidate)
    return candidate


def _upstream(name: str, spec: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    if "url" in spec:
        kind = _HTTP_TYPES.get(str(spec.get("type") or spec.get("transport") or "http"))
        if kind is None:
            raise ConfigError(f"server {name!r}: unknown type {spec.get('type')!r}")
        upstream: dict[str, Any] = {"namespace": namespace, "transport": kind, "url": spec["url"]}
        if spec.get("headers"):
            upstream["headers"] = dict(spec["headers"])
        return upstream
    if "command" not in spec:
        raise ConfigError(f"server {name!r} has neither a command nor a url")
    upstream = {"namespace": namespace, "transport": "stdio", "command": spec["command"]}
    for key in ("args", "env", "cwd"):
        if spec.get(key):
            upstream[key] = spec[key]
    return upstream


def import_client_config(text: str, *, separator: str = "__") -> str:
    """The TOML config for the servers in a client's JSON config."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"not valid JSON: {exc}") from exc
    servers = document.get("mcpServers", document.get("servers")) if isinstance(document, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise ConfigError('no "mcpServers" (Claude Desktop, Cursor) or "servers" (VS Code) object found')
    taken: set[str] = set()
    lines = [
        "# Imported by `prompt-gateway import`. Review env values: prefer ${VAR} references to literal secrets.",
        "",
        "[gateway]",
        f"namespace_separator = {_string(separator)}",
        "",
        "[server]",
        'transport = "stdio"',
    ]
    for name, spec in servers.items():
        if not isinstance(spec, dict) or spec.get("disabled") is True:
            continue
        upstream = _upstream(str(name), spec, _namespace(str(name), taken, separator))
        lines += ["", f"[[upstreams]]  # {json.dumps(str(name), ensure_ascii=False)}"]
        lines += [f"{key} = {_value(value)}" for key, value in upstream.items()]
    output = "\n".join(lines) + "\n"
    # Variables are checked when the gateway runs, not here: import runs where they may not be set.
    parse_config(tomllib.loads(output), environ=_Everything())
    return output


class _Everything(dict[str, str]):
    """An environment in which every variable is set, for validating structure alone."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> str:
        return "x" * 16
