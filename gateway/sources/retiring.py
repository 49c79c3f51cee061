"""An upstream connection a reload replaces or removes (``reloading.py``): a replaced one that serves
goes on serving until its successor is ready, or it stops serving itself (``hand_over``); then the requests it has
in flight finish on it, within the stop's grace (``shutdown_grace_s``, what a request in flight gets at
shutdown), and only then does it end (``retire``). Once retiring it is muted, so nothing it says of its
prompts or states reaches clients, and its log lines say ``retiring``, while its requests in flight still
hear their progress and may still ask their own clients. A replaced stdio server runs beside its
successor for that while.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
import structlog

from gateway.sources.upstream import UpstreamConnector

if TYPE_CHECKING:
    from gateway.sources.files.source import FilePromptSource  # (Jinja2, YAML, watchfiles: only for files)

log = structlog.get_logger("gateway.upstream")


async def hand_over(
    old: UpstreamConnector | FilePromptSource,
    successor: Callable[[], UpstreamConnector | FilePromptSource | None],
    reloaded: Callable[[], Awaitable[None]],
) -> None:
    """Until the connection ``successor()`` names (the namespace's current one; None once there is none)
    is ready, or ``old`` stops serving (its connection lost: its own restart would only bring back the
    settings the reload replaced). A folder is taken once it is read. ``reloaded()`` returns at the next
    reload, which may name another successor (or ``old`` again, taken back)."""
    async with anyio.create_task_group() as tg:
        if isinstance(old, UpstreamConnector):
            tg.start_soon(_end_when_lost, old, tg.cancel_scope)
        while (current := successor()) is not None and current is not old and not current.ready:
            if isinstance(current, UpstreamConnector):
                await _first_of(current.moved, reloaded)
            elif await _first_of(current.wait_settled, reloaded) == 0:
                break  # (a folder's first read: taken whatever it found)
        tg.cancel_scope.cancel()


async def _end_when_lost(old: UpstreamConnector, scope: anyio.CancelScope) -> None:
    while old.serving:
        await old.moved()
    scope.cancel()


async def _first_of(*waits: Callable[[], Awaitable[None]]) -> int:
    """Until the first of ``waits`` returns; its index."""
    first: list[int] = []
    async with anyio.create_task_group() as tg:

        async def wait(index: int) -> None:
            await waits[index]()
            first.append(index)
            tg.cancel_scope.cancel()

        for index in range(len(waits)):
            tg.start_soon(wait, index)
    return first[0]


async def retire(connector: UpstreamConnector | FilePromptSource, scope: anyio.CancelScope, grace_s: float) -> None:
    """End the connector's run (``scope``) once what it has in flight is answered, or ``grace_s`` is up."""
    if not isinstance(connector, UpstreamConnector):  # a folder: nothing is in flight in it
        scope.cancel()
        return
    connector.mute()
    if connector.in_flight:
        log.info("upstream_draining", upstream=connector.namespace, in_flight=connector.in_flight, grace_s=grace_s)
        with anyio.move_on_after(grace_s) as waited:
            await connector.drained()
        if connector.in_flight:
            connector.cut_reason = (
                "was replaced or removed by a reload, and its answer did not come within "
                f"shutdown_grace_s ({grace_s} s)"
            )
        log.info(
            "upstream_drained",
            upstream=connector.namespace,
            finished=not waited.cancelled_caught,
            cut=connector.in_flight,
        )
    scope.cancel()
