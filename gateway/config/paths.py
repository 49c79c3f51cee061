"""Relative file paths in a config file mean its own folder, wherever the gateway is started from.

A client starts the gateway from a folder of its own (Claude Desktop, an IDE's workspace, a service
manager's ``/``), so a path resolved against the working directory worked in the shell where ``check``
ran and failed when a client started the same config. ``path``, ``cwd``, ``env_file``, the TLS files
and the audit file are taken from the config's folder when relative, and a leading ``~/`` is the user's
home. A stdio ``command`` written as a path (``./server.py``, ``../venv/bin/server``) is taken from its
``cwd`` when it has one (where the child would look for it) and else from the config's folder; a bare
command name (``uvx``) is looked up on ``PATH`` as ever, and ``args`` are the server's own business (it
starts in ``cwd``, or where the gateway runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gateway.protocol.errors import ConfigError

UPSTREAM_PATHS = ("path", "cwd", "env_file", "ca_file", "client_cert", "client_key")


def anchored(data: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """``data`` (a config as read, variables expanded) with its relative paths made absolute under
    ``folder``. What is not text is left for validation to refuse."""
    result = dict(data)
    upstreams = data.get("upstreams")
    if isinstance(upstreams, list):
        result["upstreams"] = [_upstream(u, folder) if isinstance(u, dict) else u for u in upstreams]
    server = data.get("server")
    audit = server.get("audit") if isinstance(server, dict) else None
    if isinstance(server, dict) and isinstance(audit, dict) and "file" in audit:
        result["server"] = {**server, "audit": {**audit, "file": _under(audit["file"], folder, "server.audit.file")}}
    return result


def _upstream(upstream: dict[str, Any], folder: Path) -> dict[str, Any]:
    anchored_upstream = dict(upstream)
    for key in UPSTREAM_PATHS:
        if key in upstream:
            anchored_upstream[key] = _under(upstream[key], folder, key)
    command = upstream.get("command")
    if isinstance(command, str) and ("/" in command or command == "~" or command.startswith("~/")):
        cwd = anchored_upstream.get("cwd")  # a child finds a relative executable in its working directory
        anchored_upstream["command"] = _under(command, Path(cwd) if isinstance(cwd, str) and cwd else folder, "command")
    return anchored_upstream


def _under(value: Any, folder: Path, key: str) -> Any:
    if not isinstance(value, str) or not value:
        return value
    path = Path(value)
    if value == "~" or value.startswith("~/"):  # (not ~user: a folder may be called "~backup")
        try:
            path = path.expanduser()
        except RuntimeError as exc:
            raise ConfigError(f"{key} = {value!r}: {exc} (HOME is not set)") from exc
    return str(path if path.is_absolute() else folder / path)
