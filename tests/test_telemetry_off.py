"""With ``[telemetry]`` off (the default) the gateway runs without the OpenTelemetry SDK: nothing of it
is imported, so a gateway that does not trace pays nothing for the possibility."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVE_ONE_REQUEST = """
import sys, anyio
from gateway.app import run_gateway
from gateway.config import parse_config

async def main():
    config = parse_config({"upstreams": [{"namespace": "p", "transport": "files", "path": "."}]})
    async with run_gateway(config, settle=True) as gateway:
        await gateway.service.serve("prompts/list", None, viewer=None, notify=None, completions=False, modern=False)
    assert gateway.config.telemetry.enabled is False
    loaded = sorted(name for name in sys.modules if name.startswith("opentelemetry"))
    print(",".join(loaded) or "none")

anyio.run(main)
"""


def test_telemetry_off_imports_nothing_of_the_sdk(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", SERVE_ONE_REQUEST], cwd=tmp_path, capture_output=True, text=True, check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == "none"  # (structlog, not configured here, logs to stdout)
