"""Starting the real gateway with real SDK upstream servers, configured through a real TOML file."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]


def sdk_upstream(namespace: str, module: str, **extra: Any) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", f"tests.servers.{module}"],
        "cwd": str(ROOT),
        "timeout_s": 20,
        **extra,
    }


def _toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)  # strings, numbers, booleans and lists of them are the same in TOML


def write_config(
    path: Path,
    upstreams: list[dict[str, Any]],
    *,
    gateway: dict[str, Any] | None = None,
    policy: dict[str, Any] | None = None,
) -> Path:
    lines = ["[gateway]"] + [f"{k} = {_toml_value(v)}" for k, v in (gateway or {}).items()]
    lines += ["[server]", 'transport = "stdio"']
    for upstream in upstreams:
        lines.append("[[upstreams]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in upstream.items()]
    if policy:
        lines.append("[policy]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in policy.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def gateway_command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gateway", *extra, "--config", str(config)]


def gateway_params(config: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway", "serve", "--config", str(config), "--log-level", "warning"],
        cwd=str(ROOT),
        env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", str(ROOT))},
    )


def process_gone(pid: int) -> bool:
    """Exited (a zombie waiting for a reaper counts: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def demo_upstream(namespace: str, module: str, **extra: Any) -> dict[str, Any]:
    """A demo server shipped in the package: starts fast (no SDK import)."""
    return {"namespace": namespace, "command": sys.executable, "args": ["-m", f"gateway.demo.{module}"], **extra}
