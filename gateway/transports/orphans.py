"""Processes an upstream leaves behind when it escapes its process group (a daemon that double-forks
and calls ``setsid``): found and ended with their upstream.

Two nets, for two kinds of escape. Every child started for an upstream carries a tag of its own in its
environment (``PROMPT_GATEWAY_UPSTREAM``), which its descendants inherit: when the upstream stops,
every process still carrying its tag is ended, wherever it was reparented. And on Linux the gateway is
a child subreaper (``PR_SET_CHILD_SUBREAPER``): an orphan of any descendant is reparented to it, not to
init, so one that cleared its environment is still the gateway's child, reaped while it runs and ended
when it stops. Process tables are read with psutil; nothing here knows about prompts.

And a last resort: ``kill_all`` SIGKILLs every process the upstreams still have, for a gateway told
twice to stop.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import signal
import sys
from collections.abc import Iterable
from contextlib import suppress
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
groups: set[int] = set()
"""Process groups of the children started, until their stop is over (each child leads one of its own)."""
tags: set[str] = set()
"""The tags of the children started, until their stop is over."""
killing = False
"""Set by ``kill_all``: stops still under way skip their waits and SIGTERM, and go straight to SIGKILL."""
started_any = False
"""Whether the gateway has started a child at all (see ``may_have_adopted``)."""


def may_have_adopted() -> bool:
    """Whether an orphan can have been reparented to the gateway: once it has started a child (its
    descendants' orphans come to it as subreaper), or from the start when it is PID 1, the init of a
    container run without one of its own, to which every orphan in the container comes. Otherwise
    reaping (a scan of the whole process table) has nothing to find."""
    return started_any or os.getpid() == 1


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


def tagged(tag: str) -> list[psutil.Process]:
    """The processes carrying ``tag`` in their environment, but for the upstreams themselves (their
    own stop, and their exit, are the caller's)."""
    return _carrying({tag})


def _carrying(wanted: set[str]) -> list[psutil.Process]:
    import psutil

    found = []
    for process in psutil.process_iter():
        if process.pid in managed or process.pid == os.getpid():
            continue
        try:
            if process.environ().get(TAG_VARIABLE) in wanted:
                found.append(process)
        except (psutil.Error, OSError):
            continue  # gone meanwhile, or not ours to read
    return found


def running(process: psutil.Process) -> bool:
    """Whether ``process`` still runs; a zombie does not (and one that is the gateway's child is reaped)."""
    import psutil

    try:
        if process.status() != psutil.STATUS_ZOMBIE:
            return True
    except psutil.Error:
        return False
    with suppress(ChildProcessError):
        os.waitpid(process.pid, os.WNOHANG)
    return False


def kill_all() -> int:
    """SIGKILL every process the upstreams still have: each child's process group, what carries a tag,
    what the gateway adopted. How many processes were signalled besides the groups (for the log)."""
    global killing
    killing = True
    for pgid in list(groups):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    leftovers = _carrying(set(tags)) + _adopted()
    for process in leftovers:
        with suppress(Exception):
            process.kill()
    return len(leftovers)


def _adopted() -> list[psutil.Process]:
    import psutil

    try:
        return [child for child in psutil.Process().children() if child.pid not in managed]
    except psutil.Error:
        return []


async def end_adopted(grace_s: float) -> None:
    """At shutdown: end the orphans the gateway adopted as a subreaper (what no tag found)."""
    if not may_have_adopted():
        return
    processes = await anyio.to_thread.run_sync(_adopted)
    if processes:
        log.info("orphans_ended", count=len(processes), pids=[p.pid for p in processes][:16])
        await anyio.to_thread.run_sync(_end, processes, grace_s)


def reap_adopted() -> None:
    """Collect the exit of adopted orphans that ended by themselves (else they stay zombies)."""
    if spawning or not may_have_adopted():
        return
    import psutil

    for child in _adopted():
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError):
            continue


def _end(processes: Iterable[psutil.Process], grace_s: float) -> None:
    import psutil

    alive = list(processes)
    if not killing:
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
