import sys

import anyio
import pytest

from gateway.transports.child_stop import StopTimes
from gateway.transports.stdio import ChildSpec, child_environment, open_child
from tests.integration.helpers import process_gone

pytestmark = pytest.mark.anyio

STUBBORN = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"
)


async def test_a_child_that_ignores_eof_and_sigterm_is_killed() -> None:
    lines: list[str] = []
    spec = ChildSpec(sys.executable, ("-c", STUBBORN), stop=StopTimes(eof_s=0.2, term_s=0.2, kill_s=1))
    with anyio.fail_after(10):
        async with open_child(spec, on_stderr_line=lines.append) as (stream, process):
            assert await stream.receive() == b"up"
            pid = process.pid
    assert process_gone(pid)


async def test_stderr_lines_are_reported_and_frames_flow() -> None:
    lines: list[str] = []
    echo = "import sys; print('hello', file=sys.stderr, flush=True); [print(l.strip(), flush=True) for l in sys.stdin]"
    async with open_child(ChildSpec(sys.executable, ("-c", echo)), on_stderr_line=lines.append) as (stream, _):
        await stream.send(b'{"a":1}')
        assert await stream.receive() == b'{"a":1}'
    assert lines == ["hello"]


def test_child_environment_is_minimal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPER_SECRET_TOKEN", "x")
    env = child_environment({"API_KEY": "k"})
    assert "SUPER_SECRET_TOKEN" not in env
    assert env["API_KEY"] == "k"
    assert env["PATH"].split(":")[0] == sys.executable.rsplit("/", 1)[0]
