"""Bookkeeping that need not be on a request's path, run right after the answer has been written.

A request's audit line and its count and time for ``/metrics`` are known before its answer is sent, but
nothing the client waits for depends on them. Work handed to :func:`later` runs as the event loop's next
callback: after the step that wrote the answer (a relayed request's task writes it in the step in which
it resumes with the upstream's, with no wait between), before any task the loop starts or wakes for what
it reads next, so whatever the process serves next (another request, a ``/metrics`` scrape) sees it
done. At one request in flight the line and the count delayed the answer by about 0.03 ms when made
before it (docs/performance.md, round 10): code run once a request, on caches the other processes have
had in between. The work of all requests answered in one step of the loop runs in one callback. Where
another task writes the answer (a batch, a streamed answer, stdout to a file through a thread), the
work runs before that write, as it did before.

Outside a running loop (start, shutdown, a worker thread), and for what is still waiting when the process
exits, the work is done at once.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger("gateway.observability")

_Work = tuple[Callable[..., None], tuple[Any, ...]]
_pending: dict[asyncio.AbstractEventLoop, list[_Work]] = {}
"""What waits, by the loop it was handed over on (each loop runs its own: what runs on a loop needs no
lock); a loop's entry lives from its first work until that work has run."""


def later(work: Callable[..., None], *args: Any) -> None:
    """Run ``work(*args)`` once the current loop step is over (see the module's docstring)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # (not a loop's thread: done at once)
        work(*args)
        return
    _waiting_on(loop).append((work, args))


def _waiting_on(loop: asyncio.AbstractEventLoop) -> list[_Work]:
    """What waits for ``loop``; its run is scheduled with the first of it (on a loop not closed: else it
    runs at exit)."""
    waiting = _pending.get(loop)
    if waiting is None:
        waiting = _pending[loop] = []
        if not loop.is_closed():  # in a context of its own: what it logs is no request's (the first one's, else)
            loop.call_soon(run_pending, loop, context=contextvars.Context())
    return waiting


def run_pending(loop: asyncio.AbstractEventLoop) -> None:
    """Do what waits for ``loop``, in the order it was handed over; one failing does not stop the rest."""
    batch = _pending.pop(loop, [])
    for done, (work, args) in enumerate(batch, 1):
        try:
            work(*args)
        except Exception:
            log.exception("bookkeeping_failed", work=getattr(work, "__qualname__", repr(work)))
        except BaseException:  # (an interrupt): what is left runs next, or at exit
            _waiting_on(loop)[:0] = batch[done:]
            raise


@atexit.register
def _at_exit() -> None:
    """What a loop that ended before running it left (a loop stopped and closed outright)."""
    for loop in list(_pending):
        run_pending(loop)
