"""Reaping adopted orphans reads the whole process table (psutil, every ten seconds): a gateway that has
started no child has no descendants to adopt, and must not pay for it (it showed in the instructions per
relayed request of an HTTP-only gateway: psutil's import and a scan of /proc in the measured window)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """
import sys
import anyio
from gateway.transports import orphans
orphans.reap_adopted()
anyio.run(orphans.end_adopted, 0.1)
print("psutil" in sys.modules)
"""


def test_no_child_started_means_no_process_table_read() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reaping adopted orphans is Linux's (subreaper)")
def test_once_a_child_was_started_reaping_reads_the_table() -> None:
    script = SCRIPT.replace("orphans.reap_adopted()", "orphans.started_any = True\norphans.reap_adopted()")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "True"


def test_as_pid_1_it_may_have_adopted_from_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """A container's init adopts every orphan in the container, child of the gateway's or not: run as
    PID 1 (the image's entrypoint without an init of its own), the gateway reaps from the start."""
    from gateway.transports import orphans

    monkeypatch.setattr(orphans, "started_any", False)
    assert not orphans.may_have_adopted() or os.getpid() == 1
    monkeypatch.setattr(os, "getpid", lambda: 1)
    assert orphans.may_have_adopted()
