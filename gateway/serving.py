"""Serving clients, once the gateway runs: one client over stdio, or the HTTP front end wired to the
gateway's catalog, hub and policies and served by uvicorn inside the gateway's task group.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from gateway.app import CLIENT_REQUEST_TIMEOUT_S, Gateway
from gateway.cluster.replicas import NoCluster, RedisCluster
from gateway.cluster.session_ids import SessionIds
from gateway.config import Config, ServerSettings
from gateway.frontend.session import ClientSession
from gateway.identity.principal import LOCAL, Identity
from gateway.observability.tracing import RECEIVED_OVER, STDIO
from gateway.protocol.errors import ConfigError, GatewayError
from gateway.protocol.jsonrpc import Notification, Request, encode
from gateway.protocol.lists import PROMPTS, SKILLS, Lists
from gateway.protocol.modern import Envelope
from gateway.rpc import Notify, PeerClosed, RemoteError, RequestTimeout, RpcPeer
from gateway.transports.base import MessageStream

if TYPE_CHECKING:  # Starlette and the HTTP front end: loaded where HTTP is served (a stdio gateway, and
    # check, list, explain and render, start a fifth faster without them)
    from gateway.frontend.http.connection_bounds import ConnectionBounds
    from gateway.frontend.http.server import HttpFrontend
    from gateway.frontend.http.sessions import Ask, Push

log = structlog.get_logger("gateway.app")


async def serve_stream(gateway: Gateway, stream: MessageStream, *, stopping: anyio.Event | None = None) -> None:
    """Serve one client over one frame stream (stdio) until it hangs up or ``stopping`` is set; requests
    in flight then get the shutdown grace period to answer."""
    due = anyio.Event()
    changed: set[str] = set()  # the lists changed since the last notifications

    def list_changed(lists: Lists) -> None:
        changed.update(lists)
        due.set()

    session = ClientSession(gateway.service, on_list_changed=list_changed, who=LOCAL)
    peer: RpcPeer | None = None
    RECEIVED_OVER.set(STDIO)  # the requests' tasks, started below, inherit it

    async def ask_client(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        assert peer is not None  # noqa: S101 - set before any request is read
        return await peer.request(method, params, timeout=CLIENT_REQUEST_TIMEOUT_S)

    session.ask_client = _as_relay(ask_client)
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
                lists = frozenset(changed)
                changed.clear()
                if PROMPTS & lists:
                    await peer.notify("notifications/prompts/list_changed")
                if PROMPTS & lists and gateway.service.prompts_as_tools:  # get_prompt's schema names the prompts
                    await peer.notify("notifications/tools/list_changed")
                if SKILLS & lists:  # skill files are resources (docs/skills.md); the session judged it
                    await peer.notify("notifications/resources/list_changed")

    async def stop_when_asked() -> None:
        if stopping is not None:
            await stopping.wait()
            gateway.hub.close_subscriptions()  # listen streams answer their request: a graceful end
            peer.stop_receiving()

    gateway.hub.add(session)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(deliver)
            tg.start_soon(stop_when_asked)
            gateway.serving()  # the client's initialize is read now: the upstreams may start
            await peer.run(drain_s=gateway.config.gateway.shutdown_grace_s)
            tg.cancel_scope.cancel()
    finally:
        session.close()
        gateway.hub.discard(session)


def _as_relay(ask: Ask) -> Ask:
    """``ask`` with the client's failures said the way an upstream should hear them: the client's own
    refusal as it was (code, message, data), a client that cannot be reached or does not answer as an
    error saying so."""

    async def relayed(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        try:
            return await ask(method, params)
        except RemoteError as exc:
            refusal = GatewayError(str(exc.error.get("message")), data=exc.error.get("data"))
            code = exc.error.get("code")
            refusal.code = code if isinstance(code, int) and not isinstance(code, bool) else refusal.code
            raise refusal from exc
        except PeerClosed as exc:
            raise GatewayError(
                f"the client cannot be asked: {exc}" if str(exc) else f"the client did not answer {method}"
            ) from exc
        except RequestTimeout as exc:
            raise GatewayError(f"the client did not answer {method}") from exc

    return relayed


def http_frontend(gateway: Gateway) -> HttpFrontend:
    """The HTTP front end wired to this gateway's catalog, hub and per-token policies."""
    from gateway.frontend.http.server import HttpFrontend

    list_changed = encode(Notification("notifications/prompts/list_changed"))
    tools_changed = encode(Notification("notifications/tools/list_changed"))
    resources_changed = encode(Notification("notifications/resources/list_changed"))

    def announce(push: Push, lists: Lists) -> None:
        if PROMPTS & lists:
            push(list_changed, "list_changed")
        if PROMPTS & lists and gateway.service.prompts_as_tools:  # get_prompt's schema names the prompts
            push(tools_changed, "tools_list_changed")
        if SKILLS & lists:  # skill files are resources (docs/skills.md); the session judged it
            push(resources_changed, "resources_list_changed")

    def new_session(principal: Identity | None, session_id: str, push: Push, ask: Ask) -> ClientSession:
        session = ClientSession(
            gateway.service,
            on_list_changed=lambda lists: announce(push, lists),
            viewer=gateway.viewer_for(principal),
            session_id=session_id,
            on_close=lambda: gateway.hub.discard(session),
            who=principal,
        )
        session.ask_client = _as_relay(ask)
        gateway.hub.add(session)
        return session

    async def stateless(
        request: Request, notify: Notify, principal: Identity | None, envelope: Envelope
    ) -> dict[str, Any]:
        with gateway.service.observe(request.method):  # counted as a session's requests are
            return await gateway.service.modern(
                request, notify, viewer=gateway.viewer_for(principal), who=principal, envelope=envelope
            )

    cluster_settings = gateway.config.cluster
    gateway.cluster = (
        RedisCluster(
            cluster_settings.redis_url, generation=gateway.config.digest, heartbeat_s=cluster_settings.heartbeat_s
        )
        if cluster_settings.redis_url is not None
        else NoCluster()
    )
    return HttpFrontend(
        gateway.config.server,
        new_session,
        stateless=stateless,
        max_message_bytes=gateway.config.gateway.max_message_bytes,
        max_in_flight=gateway.config.gateway.max_requests_per_session,
        on_refused=gateway.audit.refused,
        session_ids=SessionIds(
            [key.encode() for key in cluster_settings.session_keys], ttl_s=cluster_settings.session_ttl_s
        ),
        cluster=gateway.cluster,
    )


def listening_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the listening
    # socket says TCP, and without it every response waits out Nagle against delayed ACKs (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def ensure_safe_exposure(config: Config) -> None:
    """Refuse to serve an unauthenticated HTTP endpoint beyond loopback unless the operator says so."""
    settings = config.server
    if settings.admin.enabled and settings.transport != "http":
        log.warning("admin_page_not_served", reason="[server.admin] is served by the HTTP front end only")
    if (
        settings.transport == "http"
        and not settings.loopback
        and not settings.tokens
        and settings.auth is None
        and not settings.allow_unauthenticated
    ):
        raise ConfigError(
            f"server.host {settings.host!r} is reachable from other machines and neither server.tokens nor "
            "server.auth is set: add one, or set server.allow_unauthenticated = true if something in front "
            "authenticates"
        )


def connection_bounds(settings: ServerSettings, max_message_bytes: int) -> ConnectionBounds:
    from gateway.frontend.http.connection_bounds import ConnectionBounds

    return ConnectionBounds(
        max_connections=settings.max_connections,
        max_connections_per_client=settings.max_connections_per_client,
        max_header_bytes=settings.max_header_bytes,
        header_timeout_s=settings.header_timeout_s,
        body_timeout_s=settings.body_timeout_s,
        max_body_bytes=2 * max_message_bytes + settings.max_header_bytes,  # (a chunked body's framing, trailers)
    )


async def serve_http(
    gateway: Gateway, *, stopping: anyio.Event | None = None, sock: socket.socket | None = None
) -> None:
    """Serve MCP over HTTP until ``stopping`` is set (or cancelled): then stop accepting, end every
    session's stream, and give requests in flight the grace period to finish."""
    settings = gateway.config.server
    ensure_safe_exposure(gateway.config)
    grace = gateway.config.gateway.shutdown_grace_s
    frontend = http_frontend(gateway)
    sock = sock or listening_socket(settings.host, settings.port)
    import uvicorn  # only an HTTP gateway needs it (~60 ms of every stdio gateway's start otherwise)
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from gateway.frontend.http.connection_guard import guarded

    class _EmbeddedServer(uvicorn.Server):
        """uvicorn inside the gateway's task group: the gateway, not uvicorn, owns SIGTERM/SIGINT."""

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            gateway.serving()  # accepting now: the upstreams may start

    routes = gateway.metrics.routes(lambda: gateway.connectors, gateway.cluster.status, gateway.replacements)
    closing: list[Callable[[], None]] = []
    if settings.admin.enabled:  # the operator page: its own token, or loopback only
        from gateway.frontend.admin.page import AdminPage
        from gateway.operator_view import GatewayOperatorView

        page = AdminPage(
            settings.admin,
            GatewayOperatorView(gateway),
            grant_of=frontend.access_token_grant,
            host_refusal=frontend.host_refusal,
            shared_sign_outs=gateway.cluster,
        )
        routes = [*routes, *page.routes()]
        closing.append(page.close)
    bounds = connection_bounds(settings, gateway.config.gateway.max_message_bytes)
    uv_config = uvicorn.Config(
        frontend.app(routes),
        log_config=None, access_log=False, lifespan="off",
        timeout_graceful_shutdown=max(1, round(grace)), server_header=False,
        http=guarded(HttpToolsProtocol, bounds),  # uvicorn's llhttp protocol, behind the bounds
        # X-Forwarded-Proto/-For believed from the trusted proxies only; none named, no middleware (a layer per request)
        proxy_headers=bool(settings.trusted_proxies), forwarded_allow_ips=list(settings.trusted_proxies) or None,
        ws="none",  # no WebSocket route: uvicorn's "auto" imported the websockets package (~20 ms of each start)
    )  # fmt: skip
    server = _EmbeddedServer(uv_config)
    stopped = anyio.Event()

    async def run_server() -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            stopped.set()

    host, port = sock.getsockname()[:2]
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    admin = f"http://{authority}{settings.admin.path}" if settings.admin.enabled else None
    log.info("http_listening", url=f"http://{authority}{settings.path}", sse=settings.sse_path, admin=admin)
    async with anyio.create_task_group() as tg:
        tg.start_soon(frontend.run_housekeeping, tg)
        tg.start_soon(run_server)
        try:
            if stopping is None:
                await stopped.wait()
            else:
                await stopping.wait()
        finally:
            with anyio.CancelScope(shield=True):
                gateway.hub.close_subscriptions()  # listen streams answer their request, then close
                frontend.close_all()
                for close in closing:  # the operator page's event streams
                    close()
                server.should_exit = True
                with anyio.move_on_after(grace + 1):
                    await stopped.wait()
            tg.cancel_scope.cancel()
            sock.close()
