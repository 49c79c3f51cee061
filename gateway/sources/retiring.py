"""An upstream a reload restarts or removes: the requests it has in flight finish on the connection they
were sent on, within the stop's grace (``shutdown_grace_s``, what a request in flight gets at shutdown),
and only then does that connection end. New requests go to the new connection (or, for an upstream
removed, nowhere) from the reload on; the old one is muted at once, so nothing it says of its prompts or
states reaches clients, while its requests in flight still hear their progress and may still ask the
client. A restarted stdio server runs beside its successor for that while.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import structlog

from gateway.sources.upstream import UpstreamConnector

if TYPE_CHECKING:
    from gateway.sources.files.source import FilePromptSource  # (Jinja2, YAML, watchfiles: only for files)

log = structlog.get_logger("gateway.upstream")


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
        log.info(
            "upstream_drained",
            upstream=connector.namespace,
            finished=not waited.cancelled_caught,
            cut=connector.in_flight,
        )
    scope.cancel()
