"""Where one upstream connector stands: its states as a table, in this one file (h11's ``_state.py``
habit), and the object that moves it along the table, logs each move and announces readiness gained
or lost (the catalog re-reads the upstream's list; ``/readyz`` and the operator page follow).

    starting ─► ready ─► backing-off ─► starting ...
        └──────────────► failed (gave up: bad handshake, or too many restarts)
    any ─► stopped (gateway shutting down)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import anyio

from gateway.protocol.lists import EVERY_LIST, Lists, OnChange

State = Literal["starting", "ready", "backing-off", "failed", "stopped"]

TRANSITIONS: dict[State, frozenset[State]] = {
    "starting": frozenset({"ready", "backing-off", "failed", "stopped"}),
    "ready": frozenset({"backing-off", "failed", "stopped"}),
    "backing-off": frozenset({"starting", "stopped"}),
    "failed": frozenset({"stopped"}),
    "stopped": frozenset(),
}


class UpstreamStates:
    """One upstream's state, changed only along ``TRANSITIONS``. ``on_change`` hears of every move into
    or out of ``ready`` (out of it as soon as the connection is lost), ``on_moved`` of every other move;
    waiters hear of the first settled state and of each new readiness."""

    def __init__(
        self,
        namespace: str,
        log: Any,
        on_change: OnChange,
        on_moved: Callable[[str], None] | None = None,
    ) -> None:
        self.state: State = "starting"
        self.since = anyio.current_time()
        """When the current state was entered (the event loop's clock): "still starting, for 8 s"."""
        self.retry_at: float | None = None
        """While backing off: when the next attempt starts."""
        self._namespace = namespace
        self._log = log
        self._on_change = on_change
        self._on_moved = on_moved  # every other move (what shows states, the operator page, follows them)
        self._settled = anyio.Event()
        self._ready_again = anyio.Event()
        self._moved = anyio.Event()  # set (and replaced) at each move, and when a ready connection is lost
        self._loss_announced = False

    def enter(self, state: State, **details: Any) -> None:
        if state == self.state:
            return
        if state not in TRANSITIONS[self.state]:
            raise RuntimeError(f"upstream state {self.state} -> {state} is not a transition")
        was_ready, announced = self.state == "ready", self._loss_announced
        self._loss_announced = False
        self.state = state
        self.since = anyio.current_time()
        retry_in_s = details.get("retry_in_s")
        self.retry_at = self.since + retry_in_s if isinstance(retry_in_s, (int, float)) else None
        self._log.info("upstream_state", state=state, **details)
        if state != "starting":
            self._settled.set()
        if state == "ready":
            self._ready_again.set()
            self._ready_again = anyio.Event()
        self._tell_moved()
        if (was_ready and not announced) or state == "ready":
            self._on_change(self._namespace, EVERY_LIST)
        elif self._on_moved is not None:
            self._on_moved(self._namespace)

    def mute(self, log: Any) -> None:
        """Its moves are no one's news from now on (a reload replaced the connection or removed it); they
        are still logged, to ``log`` from now on, and waiters still hear of them."""
        self._on_change = self._on_moved = no_one
        self._log = log

    def connection_lost(self) -> None:
        """A ready upstream's connection has ended: its loss is announced now. Its state moves on only
        once its process group is stopped, which may take seconds (end of input, SIGTERM, SIGKILL, each
        with its wait), and the listing leaves it out from now on: a list_changed then would come late."""
        if self.state == "ready" and not self._loss_announced:
            self._loss_announced = True
            self._tell_moved()
            self._on_change(self._namespace, EVERY_LIST)

    async def settled(self) -> None:
        """Until the first connection attempt has either succeeded or failed."""
        await self._settled.wait()

    async def ready_again(self) -> None:
        """Until the next time the upstream becomes ready."""
        await self._ready_again.wait()

    @property
    def serving(self) -> bool:
        """Ready, its connection not lost."""
        return self.state == "ready" and not self._loss_announced

    async def moved(self) -> None:
        """Until its next move (or the loss of its ready connection)."""
        await self._moved.wait()

    def _tell_moved(self) -> None:
        self._moved.set()
        self._moved = anyio.Event()


def no_one(_namespace: str, _lists: Lists = EVERY_LIST) -> None:
    """Where a muted upstream's news goes."""
