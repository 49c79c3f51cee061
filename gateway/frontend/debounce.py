"""Upstream list changes, gathered: a burst of them becomes one fan-out to the clients."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import structlog

from gateway.frontend.hub import Hub
from gateway.observability.metrics import Metrics
from gateway.protocol.lists import EVERY_LIST, NO_LIST, Lists, united

log = structlog.get_logger("gateway.app")


class ListChangedDebouncer:
    """Turns a burst of upstream changes into one fan-out after ``delay_s`` of quiet gathering.

    What is due is a flag; the event only wakes ``run``, and only ``run`` replaces it, so ``forget``
    can never leave ``run`` waiting on an event that no ``poke`` will set again.
    """

    def __init__(
        self, delay_s: float, hub: Hub, metrics: Metrics, *, before: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        self.delay_s = delay_s
        self._before = before  # awaited before each fan-out (the replicas count it: cluster/replicas.py)
        self._hub = hub
        self._metrics = metrics
        self._due = False
        self._changed: dict[str, Lists] | None = {}  # each upstream's lists that changed (None: anything)
        self._wake = anyio.Event()

    def poke(self, namespace: str | None = None, lists: Lists = EVERY_LIST) -> None:
        """An upstream's ``lists`` changed (``namespace``), or anything may have (None: a reload)."""
        self._due = True
        if namespace is None:
            self._changed = None
        elif self._changed is not None:
            self._changed[namespace] = self._changed.get(namespace, NO_LIST) | lists
        self._wake.set()

    def forget(self) -> None:
        """Drop a pending fan-out (start-up: no client has seen a list yet, so nothing changed for anyone)."""
        self._due = False
        self._changed = {}

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await anyio.sleep(self.delay_s)  # gather the rest of the burst
            if not self._due:
                continue  # forgotten while gathering
            self._due = False
            changed, self._changed = self._changed, {}
            if self._before is not None:
                await self._before()
            sessions = self._hub.broadcast_list_changed(changed)
            self._metrics.list_changed.inc(sessions)
            log.info("list_changed_broadcast", sessions=sessions, lists=sorted(united(changed)))
