"""Bookkeeping that need not be on a request's path, run right after the answer has been written.

A request's audit line and its count and time for ``/metrics`` are known before its answer is sent, but
nothing the client waits for depends on them. Work handed to :func:`later` runs as the event loop's
next callback: after the step that wrote the answer (a relayed request's answer is written in the step
that receives the upstream's, with no wait between), before any task the loop starts or wakes for what
it reads next, so whatever the process serves next (another request, a ``/metrics`` scrape) sees it
done. At one request in flight the line and the count delayed the answer by about 0.03 ms when made
before it (docs/performance.md, round 9): code run once a request, on caches the other processes have
had in between. The work of all requests answered in one step of the loop runs in one callback.

Outside a running loop (start, shutdown, a worker thread), and for what is still waiting when the process
exits, the work is done at once.
"""

from __future__ import annotations

import asyncio
import atexit
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger("gateway.observability")

_pending: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
_scheduled_on: asyncio.AbstractEventLoop | None = None  # the loop a run is scheduled on


def later(work: Callable[..., None], *args: Any) -> None:
    """Run ``work(*args)`` once the current loop step is over (see the module's docstring)."""
    global _scheduled_on
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # (not the loop's thread: what waits is the loop's to run)
        work(*args)
        return
    _pending.append((work, args))
    if _scheduled_on is not loop:  # (a run scheduled on a loop that has since ended never happens)
        _scheduled_on = loop
        loop.call_soon(run_pending)


def run_pending() -> None:
    """Do what waits, in the order it was handed over; one failing does not stop the rest."""
    global _pending, _scheduled_on
    _scheduled_on = None
    while _pending:
        batch, _pending = _pending, []
        for work, args in batch:
            try:
                work(*args)
            except Exception:
                log.exception("bookkeeping_failed", work=getattr(work, "__qualname__", repr(work)))


atexit.register(run_pending)
