"""With ``[telemetry]`` off (the default) the gateway runs without the OpenTelemetry SDK: nothing of it
is imported, so a gateway that does not trace pays nothing for the possibility. The same for ``[limits]``
unset and the ``limits`` library (its import was ~30 ms of every start)."""

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
    loaded = sorted(name for name in sys.modules if name.split(".")[0] == sys.argv[1])
    print(",".join(loaded) or "none")

anyio.run(main)
"""


def _loaded_after_one_request(tmp_path: Path, package: str) -> str:
    ran = subprocess.run(
        [sys.executable, "-c", SERVE_ONE_REQUEST, package], cwd=tmp_path, capture_output=True, text=True, check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.strip().splitlines()[-1]  # (structlog, not configured here, logs to stdout)


def test_telemetry_off_imports_nothing_of_the_sdk(tmp_path: Path) -> None:
    assert _loaded_after_one_request(tmp_path, "opentelemetry") == "none"


def test_limits_unset_imports_nothing_of_the_library(tmp_path: Path) -> None:
    assert _loaded_after_one_request(tmp_path, "limits") == "none"
