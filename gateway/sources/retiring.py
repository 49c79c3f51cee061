"""An upstream connection a reload replaces or removes (``reloading.py``): a replaced one that serves
goes on serving until its successor has made its first attempt (``hand_over``); then the requests it has
in flight finish on it, within the stop's grace (``shutdown_grace_s``, what a request in flight gets at
shutdown), and only then does it end (``retire``). Once retiring it is muted, so nothing it says of its
prompts or states reaches clients, and its log lines say ``retiring``, while its requests in flight still
hear their progress and may still ask their own clients. A replaced stdio server runs beside its
successor for that while.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import structlog

from gateway.sources.upstream import UpstreamConnector

if TYPE_CHECKING:
    from gateway.sources.files.source import FilePromptSource  # (Jinja2, YAML, watchfiles: only for files)

log = structlog.get_logger("gateway.upstream")


async def hand_over(successor: Callable[[], UpstreamConnector | FilePromptSource | None]) -> None:
    """Until the connection ``successor()`` names (the namespace's current one; None once it has none)
    has made its first attempt, each bounded as ``check`` bounds it: a later reload may name another."""
    while (current := successor()) is not None:
        limit = current.settings.timeout_s + 1 if isinstance(current, UpstreamConnector) else FOLDER_READ_S
        with anyio.move_on_after(limit):
            await current.wait_settled()
        if successor() is current:
            return


FOLDER_READ_S = 30.0
"""How long a folder's first read is waited for at most (a folder replacing a server)."""


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
