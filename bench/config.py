"""What every benchmark section shares: where things are, and the gateway's config written as TOML."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


STARTUP_LIMIT_S = 300.0
"""How long any wait for upstreams to come up may last before the section says it could not measure."""


def toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def gateway_config(path: Path, upstreams: dict[str, dict[str, Any]], *, http: bool, **gateway: Any) -> Path:
    lines = ["[gateway]"] + [f"{k} = {toml(v)}" for k, v in gateway.items()]
    lines += ["[server]", 'transport = "http"' if http else 'transport = "stdio"', "port = 0"]
    # every load comes from one address here: the per-address share would refuse the sessions section
    lines += ["max_connections = 20000", "max_connections_per_client = 20000", "max_sessions = 20000"]
    for name, spec in upstreams.items():
        lines += ["[[upstreams]]", f"namespace = {toml(name)}"] + [f"{k} = {toml(v)}" for k, v in spec.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def stdio_upstream(**env: str) -> dict[str, Any]:
    return {"command": PY, "args": ["-m", "bench.upstream"], "cwd": str(ROOT), "env": env, "timeout_s": 60}
