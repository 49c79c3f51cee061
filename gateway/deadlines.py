"""Time-outs for a peer's outgoing requests on one event-loop timer, not one each.

A peer's requests mostly share one time-out (the upstream's ``timeout_s``), so their deadlines fall in
the order they were set: per time-out value, the deadlines are kept in insertion order, and a single
timer waits for the earliest of all. A request that ends takes its deadline out (a dictionary pop); the
timer is never re-armed for that, and when it fires early (its request answered long ago) it only looks
at the current earliest deadline and waits again. ``asyncio.timeout`` costs a timer handle and its
bookkeeping on every request (~4 µs, more than the rest of the peer's work on a request over stdio).

A deadline that passes cancels its request's task, as ``asyncio.timeout`` does; :meth:`Deadline.expired`
tells that cancellation from any other (the caller's, a shutdown), counting cancellations as asyncio's
own time-out does.
"""

from __future__ import annotations

import asyncio
from typing import Any

EARLY_S = 0.001
"""How early a deadline may be called passed: the loop's timers (libuv's, under uvloop) count whole
milliseconds, so a timer may fire just before its time; waiting again for that fraction would spin."""


class Deadline:
    """One request's deadline; ``expired()`` once it passed while the request was waiting."""

    __slots__ = ("_cancelling", "_fired", "_task", "at")

    def __init__(self, at: float, task: asyncio.Task[Any]) -> None:
        self.at = at
        self._task = task
        self._cancelling = task.cancelling()
        self._fired = False

    def fire(self) -> None:
        self._fired = True
        self._task.cancel()

    def expired(self) -> bool:
        """Whether the deadline cancelled the request, and that is the only cancellation its task has
        (called once, where the request's cancellation is caught: its task is uncancelled)."""
        return self._fired and self._task.uncancel() <= self._cancelling


class Deadlines:
    """The deadlines of one peer's requests, on one timer."""

    def __init__(self) -> None:
        self._by_timeout: dict[float, dict[object, Deadline]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def add(self, key: object, timeout: float) -> Deadline:
        """The deadline of the request ``key`` (unique among those pending), made by the task that awaits it."""
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline needs a task to cancel")
        loop = asyncio.get_running_loop()
        deadline = Deadline(loop.time() + timeout, task)
        pending = self._by_timeout.get(timeout)
        if pending is None:
            pending = self._by_timeout[timeout] = {}
        pending[key] = deadline
        if self._timer is None or deadline.at < self._timer_at:
            self._arm(loop, deadline.at)
        return deadline

    def remove(self, key: object, timeout: float) -> None:
        pending = self._by_timeout.get(timeout)
        if pending is not None:
            pending.pop(key, None)

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(at, self._fire, loop)
        self._timer_at = at

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = loop.time() + EARLY_S
        earliest: float | None = None
        for timeout, pending in list(self._by_timeout.items()):
            while pending:
                key, deadline = next(iter(pending.items()))
                if deadline.at > now:
                    earliest = deadline.at if earliest is None else min(earliest, deadline.at)
                    break
                del pending[key]
                deadline.fire()
            if not pending:
                del self._by_timeout[timeout]
        if earliest is not None:
            self._arm(loop, earliest)
