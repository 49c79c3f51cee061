"""Stopping a child process and everything it started, within a bound.

The order is the MCP lifecycle's (end of input, then SIGTERM, then SIGKILL), applied to the child's
process group and to what left the group carrying its tag (orphans.py) together. Each step waits a
bounded time, short enough that an MCP client stopping the gateway the SDK's way (stdin closed, 2 s,
SIGTERM, 2 s, SIGKILL) sees it stop every upstream before the SIGKILL: a server that ignores end of
input (mcp-server-sqlite does) used to be given 2 s of it, and the client's SIGTERM then ended the
gateway with the server still running.

The leader's exit is awaited; that of the rest of its group, and of what escaped it, is polled: they
are not the gateway's children until the leader dies (then it adopts them, as subreaper), and no
event tells of the exit of a process that is not one's child.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from anyio.abc import Process

from gateway.transports import orphans

if TYPE_CHECKING:
    import psutil

POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class StopTimes:
    """How long each step of a child's stop waits before the next: ``eof_s`` for it to exit on end of
    input, ``term_s`` after SIGTERM, ``kill_s`` for SIGKILL to be seen. Their sum bounds the stop."""

    eof_s: float = 1.0
    term_s: float = 1.0
    kill_s: float = 0.5


STOP_TIMES = StopTimes()


async def stop_child(process: Process, tag: str, times: StopTimes) -> None:
    """Close the child's stdin and let it exit its own way for ``eof_s``; then end its process group and
    what left the group carrying ``tag``, which a server that exits on end of input can leave behind."""
    if process.stdin is not None:
        with suppress(Exception):
            await process.stdin.aclose()
    if not orphans.killing:
        with anyio.move_on_after(times.eof_s):
            await process.wait()
    escaped = await anyio.to_thread.run_sync(orphans.tagged, tag)
    if escaped:
        orphans.log.info("upstream_leftovers_ended", count=len(escaped), pids=[p.pid for p in escaped][:16])
    await end_group(process, times, escaped)


async def end_group(process: Process, times: StopTimes, escaped: Sequence[psutil.Process] = ()) -> None:
    """SIGTERM to the child's process group and to ``escaped``, then SIGKILL to what remains of them,
    each followed by a bounded wait for them to be gone (straight to SIGKILL once the gateway is being
    stopped at once)."""
    for sig, wait_s in ((signal.SIGTERM, times.term_s), (signal.SIGKILL, times.kill_s)):
        if sig == signal.SIGTERM and orphans.killing:
            continue
        if not _remaining(process, escaped):
            return
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        for leftover in escaped:
            with suppress(Exception):
                leftover.send_signal(sig)  # psutil checks it is still the same process, not a reused pid
        if await _wait_until(lambda: not _remaining(process, escaped), wait_s):
            return


async def _wait_until(done: Callable[[], bool], timeout_s: float) -> bool:
    with anyio.move_on_after(timeout_s):
        while not done():  # noqa: ASYNC110 - no event says so (the module's docstring)
            await anyio.sleep(POLL_S)
        return True
    return done()


def _remaining(process: Process, escaped: Sequence[psutil.Process]) -> bool:
    """Whether the leader, a member of its group or an escaped process still runs. Members that died
    after the leader are the gateway's to reap (it adopts them as subreaper): they are reaped here, or
    their zombies would keep the group looking alive."""
    if process.returncode is None:
        return True
    return _group_alive(process.pid) or any(orphans.running(leftover) for leftover in escaped)


def _group_alive(pgid: int) -> bool:
    """Only called once the leader is reaped: every child of the gateway left in the group is a member
    the leader left behind, never an upstream's own leader (each is in a group of its own)."""
    with suppress(ChildProcessError):
        while os.waitpid(-pgid, os.WNOHANG)[0] > 0:
            pass
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
