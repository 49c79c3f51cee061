"""The composition root: builds upstream connectors, the catalog and the hub from a Config, and owns
the one task group everything runs in. Leaving ``run_gateway`` stops every child process."""

from __future__ import annotations

import secrets
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass

import anyio
import structlog
import uvicorn

from gateway.catalog import Catalog, Mount
from gateway.config import Config
from gateway.cursor import CursorCodec
from gateway.errors import ConfigError
from gateway.frontend import ClientSession, Hub
from gateway.http_server import HttpFrontend, Push
from gateway.policy import Rules
from gateway.progress import ProgressRelay
from gateway.protocol.jsonrpc import Notification, encode
from gateway.rpc import PeerClosed, RpcPeer
from gateway.transports.base import MessageStream
from gateway.upstream import Backoff, UpstreamConnector

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
    progress = ProgressRelay()

    def changed(namespace: str) -> None:
        if catalog_ref:
            catalog_ref[0].invalidate(namespace)
        debouncer.poke()

    connectors = tuple(
        UpstreamConnector(
            u,
            on_change=changed,
            max_message_bytes=settings.max_message_bytes,
            backoff=Backoff(settings.restart_initial_s, settings.restart_max_s, settings.max_restarts),
            max_in_flight=settings.max_requests_per_upstream,
            on_progress=progress.deliver,
        )
        for u in config.upstreams
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
        on_upstream_error=settings.on_upstream_error,
        progress=progress,
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
        max_in_flight=gateway.config.gateway.max_requests_per_session,
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


class _EmbeddedServer(uvicorn.Server):
    """uvicorn inside the gateway's task group: the gateway, not uvicorn, owns SIGTERM/SIGINT."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def http_frontend(gateway: Gateway) -> HttpFrontend:
    """The HTTP front end wired to this gateway's catalog, hub and per-token policies."""
    config = gateway.config
    sep = config.gateway.namespace_separator
    viewers = {t.name: _rules(t.policy.allow, t.policy.deny, sep) for t in config.server.tokens}
    list_changed = encode(Notification("notifications/prompts/list_changed"))

    def new_session(principal: str | None, session_id: str, push: Push) -> ClientSession:
        session = ClientSession(
            gateway.catalog,
            completions=gateway.offers_completions,
            on_list_changed=lambda: push(list_changed, "list_changed"),
            viewer=viewers.get(principal) if principal is not None else None,
            session_id=session_id[:8],
            on_close=lambda: gateway.hub.discard(session),
        )
        gateway.hub.add(session)
        return session

    return HttpFrontend(
        config.server,
        new_session,
        max_message_bytes=config.gateway.max_message_bytes,
        max_in_flight=config.gateway.max_requests_per_session,
    )


def listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def ensure_safe_exposure(config: Config) -> None:
    """Refuse to serve an unauthenticated HTTP endpoint beyond loopback unless the operator says so."""
    settings = config.server
    if (
        settings.transport == "http"
        and not settings.loopback
        and not settings.tokens
        and not settings.allow_unauthenticated
    ):
        raise ConfigError(
            f"server.host {settings.host!r} is reachable from other machines and no server.tokens are set: "
            "add tokens, or set server.allow_unauthenticated = true if something in front authenticates"
        )


async def serve_http(gateway: Gateway, *, grace_s: int = 5) -> None:
    """Serve MCP over HTTP until cancelled; then end every session's stream and stop uvicorn."""
    settings = gateway.config.server
    ensure_safe_exposure(gateway.config)
    frontend = http_frontend(gateway)
    sock = listening_socket(settings.host, settings.port)
    uv_config = uvicorn.Config(
        frontend.app(),
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=grace_s,
        server_header=False,
    )
    server = _EmbeddedServer(uv_config)
    stopped = anyio.Event()

    async def run_server() -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            stopped.set()

    host, port = sock.getsockname()[:2]
    log.info("http_listening", url=f"http://{host}:{port}{settings.path}", sse=settings.sse_path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(frontend.run_housekeeping, tg)
        tg.start_soon(run_server)
        try:
            await stopped.wait()
        finally:
            with anyio.CancelScope(shield=True):
                frontend.close_all()
                server.should_exit = True
                with anyio.move_on_after(grace_s + 1):
                    await stopped.wait()
            tg.cancel_scope.cancel()
            sock.close()
