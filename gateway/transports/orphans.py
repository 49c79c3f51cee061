"""Processes an upstream leaves behind when it escapes its process group (a daemon that double-forks
and calls ``setsid``): found and ended with their upstream.

Two nets, for two kinds of escape. Every child started for an upstream carries a tag of its own in its
environment (``PROMPT_GATEWAY_UPSTREAM``), which its descendants inherit: when the upstream stops,
every process still carrying its tag is ended, wherever it was reparented. And on Linux the gateway is
a child subreaper (``PR_SET_CHILD_SUBREAPER``): an orphan of any descendant is reparented to it, not to
init, so one that cleared its environment is still the gateway's child, reaped while it runs and ended
when it stops. Process tables are read with psutil; nothing here knows about prompts.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

import anyio
import structlog

if TYPE_CHECKING:
    import psutil

log = structlog.get_logger("gateway.process")

TAG_VARIABLE = "PROMPT_GATEWAY_UPSTREAM"
_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h

spawning = 0
"""Children being started: their pids are not in ``managed`` yet, so reaping waits (it could take the
exit of one that ended at once, which its event loop would then never see)."""
managed: set[int] = set()
"""Pids of the children the gateway started itself and waits for (their exit is its event loop's to
collect): never reaped here."""


def new_tag() -> str:
    return secrets.token_hex(8)


def become_subreaper() -> bool:
    """Make orphans of every descendant the gateway's children (Linux); False where that cannot be."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        log.warning("subreaper_unavailable", error=os.strerror(ctypes.get_errno()))
        return False
    return True


def _tagged(tag: str) -> list[psutil.Process]:
    import psutil

    found = []
    for process in psutil.process_iter():
        if process.pid in managed:
            continue  # the upstream itself: its own stop, and its exit, are the caller's
        try:
            if process.environ().get(TAG_VARIABLE) == tag:
                found.append(process)
        except (psutil.Error, OSError):
            continue  # gone meanwhile, or not ours to read
    return found


def _adopted() -> list[psutil.Process]:
    import psutil

    try:
        return [child for child in psutil.Process().children() if child.pid not in managed]
    except psutil.Error:
        return []


async def end_tagged(tag: str, grace_s: float) -> None:
    """End every process still carrying this upstream's tag (SIGTERM, then SIGKILL after ``grace_s``)."""
    processes = await anyio.to_thread.run_sync(_tagged, tag)
    if processes:
        log.info("upstream_leftovers_ended", count=len(processes), pids=[p.pid for p in processes][:16])
        await anyio.to_thread.run_sync(_end, processes, grace_s)


async def end_adopted(grace_s: float) -> None:
    """At shutdown: end the orphans the gateway adopted as a subreaper (what no tag found)."""
    processes = await anyio.to_thread.run_sync(_adopted)
    if processes:
        log.info("orphans_ended", count=len(processes), pids=[p.pid for p in processes][:16])
        await anyio.to_thread.run_sync(_end, processes, grace_s)


def reap_adopted() -> None:
    """Collect the exit of adopted orphans that ended by themselves (else they stay zombies)."""
    import psutil

    if spawning:
        return
    for child in _adopted():
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError):
            continue


def _end(processes: Iterable[psutil.Process], grace_s: float) -> None:
    import psutil

    alive = list(processes)
    for process in alive:
        try:
            process.terminate()
        except psutil.Error:
            continue
    _, alive = psutil.wait_procs(alive, timeout=grace_s)  # reaps those that are the gateway's children
    for process in alive:
        try:
            process.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(alive, timeout=grace_s)
