"""The composition root: builds upstream connectors, the catalog and the hub from a Config, and owns
the one task group everything runs in. Leaving ``run_gateway`` stops every child process."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import anyio
import structlog

from gateway.catalog import Catalog, Mount
from gateway.config import Config
from gateway.cursor import CursorCodec
from gateway.frontend import ClientSession, Hub
from gateway.policy import Rules
from gateway.rpc import PeerClosed, RpcPeer
from gateway.transports.base import MessageStream
from gateway.upstream import UpstreamConnector

log = structlog.get_logger("gateway.app")


@dataclass
class Gateway:
    config: Config
    catalog: Catalog
    hub: Hub
    connectors: tuple[UpstreamConnector, ...]

    def offers_completions(self) -> bool:
        return any(c.ready and c.completes for c in self.connectors)


class _Debouncer:
    """Turns a burst of upstream changes into one fan-out after ``delay_s`` of quiet gathering."""

    def __init__(self, delay_s: float, hub: Hub) -> None:
        self._delay_s = delay_s
        self._hub = hub
        self._due = anyio.Event()

    def poke(self) -> None:
        self._due.set()

    async def run(self) -> None:
        while True:
            await self._due.wait()
            await anyio.sleep(self._delay_s)  # gather the rest of the burst
            self._due = anyio.Event()
            sessions = self._hub.broadcast_list_changed()
            log.info("list_changed_broadcast", sessions=sessions)


def _rules(allow: tuple[str, ...], deny: tuple[str, ...], separator: str) -> Rules:
    return Rules(allow=allow, deny=deny, separator=separator)


@asynccontextmanager
async def run_gateway(config: Config) -> AsyncIterator[Gateway]:
    settings = config.gateway
    sep = settings.namespace_separator
    secret = settings.cursor_secret.encode() if settings.cursor_secret else secrets.token_bytes(32)
    hub = Hub()
    debouncer = _Debouncer(settings.list_changed_debounce_s, hub)
    catalog_ref: list[Catalog] = []

    def changed(namespace: str) -> None:
        if catalog_ref:
            catalog_ref[0].invalidate(namespace)
        debouncer.poke()

    connectors = tuple(
        UpstreamConnector(u, on_change=changed, max_message_bytes=settings.max_message_bytes) for u in config.upstreams
    )
    mounts = [
        Mount(c, prefix=c.namespace + sep if u.prefix else "", rules=_rules(u.policy.allow, u.policy.deny, sep))
        for c, u in zip(connectors, config.upstreams, strict=True)
    ]
    catalog = Catalog(
        mounts,
        codec=CursorCodec(secret),
        generation=config.generation,
        policy=_rules(config.policy.allow, config.policy.deny, sep),
        page_size=settings.page_size,
    )
    catalog_ref.append(catalog)
    gateway = Gateway(config, catalog, hub, connectors)
    async with anyio.create_task_group() as tg:
        for connector in connectors:
            tg.start_soon(connector.run)
        tg.start_soon(debouncer.run)
        # Serve once every upstream has connected or failed (bounded by its own timeout), so the
        # first client sees the full list and the right capabilities.
        with anyio.move_on_after(max((u.timeout_s for u in config.upstreams), default=0) + 1):
            for connector in connectors:
                await connector.wait_settled()
        log.info("gateway_started", upstreams={c.namespace: c.state for c in connectors})
        try:
            yield gateway
        finally:
            tg.cancel_scope.cancel()


async def serve_stream(gateway: Gateway, stream: MessageStream, *, viewer: Rules | None = None) -> None:
    """Serve one client over one frame stream (stdio) until it hangs up."""
    due = anyio.Event()

    def list_changed() -> None:
        due.set()

    session = ClientSession(
        gateway.catalog, completions=gateway.offers_completions, on_list_changed=list_changed, viewer=viewer
    )
    peer = RpcPeer(
        stream,
        on_request=session.handle_request,
        on_notification=session.handle_notification,
        answer_malformed=True,
        logger=session.log,
    )

    async def deliver() -> None:
        """One notification per wake-up: changes that pile up while one is being sent coalesce."""
        nonlocal due
        with suppress(PeerClosed):
            while True:
                await due.wait()
                due = anyio.Event()
                await peer.notify("notifications/prompts/list_changed")

    gateway.hub.add(session)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(deliver)
            await peer.run()
            tg.cancel_scope.cancel()
    finally:
        session.close()
        gateway.hub.discard(session)
