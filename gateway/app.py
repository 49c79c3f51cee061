"""The composition root: builds upstream connectors, the catalog and the hub from a Config, owns the
one task group everything runs in, and applies a new Config in place (hot reload).

Leaving ``run_gateway`` stops every upstream (child processes included). ``Gateway.reload`` restarts
only the upstreams whose settings changed, rebuilds the catalog (policy, page size, cursor layout),
keeps every client session connected and tells them all that the list changed.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from anyio.abc import TaskGroup

from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.mounts import Mount
from gateway.catalog.policy import Rules, Viewer
from gateway.cluster.replicas import NoCluster, RedisCluster
from gateway.cluster.session_ids import SessionIds
from gateway.config import Config, FilesUpstream, HttpUpstream, ServerSettings, StdioUpstream
from gateway.frontend.debounce import ListChangedDebouncer
from gateway.frontend.http.connection_guard import ConnectionBounds, guarded
from gateway.frontend.http.server import HttpFrontend
from gateway.frontend.http.sessions import Ask, Push
from gateway.frontend.service import ClientSession, Hub, PromptService
from gateway.identity.audit import AuditTrail
from gateway.identity.principal import LOCAL, Identity
from gateway.identity.views import ClaimViews
from gateway.observability.metrics import Metrics
from gateway.protocol.errors import ConfigError, GatewayError
from gateway.protocol.jsonrpc import Notification, Request, encode
from gateway.rpc import Notify, PeerClosed, RemoteError, RequestTimeout, RpcPeer
from gateway.sources.backoff import Backoff
from gateway.sources.client_requests import ClientRequestRelay
from gateway.sources.progress import ProgressRelay
from gateway.sources.upstream import UpstreamConnector
from gateway.transports import orphans
from gateway.transports.base import MessageStream

if TYPE_CHECKING:
    from gateway.sources.files.source import FilePromptSource

log = structlog.get_logger("gateway.app")

CLIENT_REQUEST_TIMEOUT_S = 600.0
"""How long a client may take to answer a request relayed from an upstream (a person may be answering)."""


@dataclass
class _Running:
    settings: StdioUpstream | HttpUpstream | FilesUpstream
    connector: UpstreamConnector | FilePromptSource
    scope: anyio.CancelScope


class Gateway:
    def __init__(self, config: Config, task_group: TaskGroup) -> None:
        self.config = config
        self.hub = Hub(sees=lambda viewer, namespaces: self.catalog.shows_any(namespaces, viewer))
        self._tg = task_group
        self._progress = ProgressRelay()
        self._client_requests = ClientRequestRelay()
        self.metrics = Metrics()
        self._debouncer = ListChangedDebouncer(
            config.gateway.list_changed_debounce_s,
            self.hub,
            self.metrics,
            before=lambda: self.cluster.catalog_changed(),
        )
        self._running: dict[str, _Running] = {}
        self._secret = self._secret_for(config, None)
        self._viewers = self._token_rules(config)
        self._claim_views = ClaimViews(config.server.views, config.gateway.namespace_separator)
        self.catalog = self._build_catalog(config)
        self.audit = AuditTrail(config.server.audit)
        self.service = PromptService(
            self.current_catalog,
            completions=self.offers_completions,
            hub=self.hub,
            metrics=self.metrics,
            warm_up=self.first_attempts,
            audit=self.audit,
            prompts_as_tools=config.server.prompts_as_tools,
        )
        self._warm = False
        self._warm_until = 0.0
        self.cluster: NoCluster | RedisCluster = NoCluster()  # the HTTP front end's, with [cluster] redis_url
        self.metrics.watch(lambda: self.connectors, lambda: len(self.hub))

    # ---- what the front ends use --------------------------------------------------------------

    @property
    def connectors(self) -> tuple[UpstreamConnector | FilePromptSource, ...]:
        return tuple(self._running[u.namespace].connector for u in self.config.upstreams)

    def offers_completions(self) -> bool:
        return any(c.ready and c.completes for c in self.connectors)

    def current_catalog(self) -> Catalog:
        return self.catalog

    def viewer_for(self, identity: Identity | None) -> Viewer | None:
        """A static token's policy, or the views an access token's claims match (None: the global policy alone)."""
        if identity is None:
            return None
        if identity.kind == "oauth":
            return self._claim_views.viewer_for(identity.claims or {})
        if identity.kind == "token":
            return self._viewers.get(identity.name)
        return None

    @staticmethod
    def _token_rules(config: Config) -> dict[str, Rules]:
        """Each token's policy, compiled once per config rather than once per session."""
        sep = config.gateway.namespace_separator
        return {t.name: Rules.of(t.policy, sep) for t in config.server.tokens}

    # ---- lifetime -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every upstream and return at once: clients are served from now on, whatever the
        upstreams do (an upstream that comes up later is announced with list_changed)."""
        self._warm_until = anyio.current_time() + self.config.gateway.startup_wait_s
        for upstream in self.config.upstreams:
            await self._start_upstream(upstream)
        self.catalog = self._build_catalog(self.config)
        self._tg.start_soon(self._announce_changes)
        log.info("gateway_started", upstreams={c.namespace: c.state for c in self.connectors})

    async def _announce_changes(self) -> None:
        """Changes are announced once start-up's wait is over: until then every answer waits for it, so a
        change before it is news to nobody (and a client mid-initialize gets no notification first)."""
        await self.first_attempts()
        await self._debouncer.run()

    async def settle(self) -> None:
        """Until every upstream has connected or failed once (``check`` and ``list`` report that state)."""
        await self._settle(self.connectors)

    async def first_attempts(self) -> None:
        """The first requests wait up to ``startup_wait_s`` after start for upstreams still in their first
        attempt, so a client starting with the gateway sees the whole list; later ones never wait."""
        if self._warm:
            return
        with anyio.move_on_after(max(0.0, self._warm_until - anyio.current_time())):
            for connector in self.connectors:
                await connector.wait_settled()
        if not self._warm:
            self._warm = True  # all settled, or the time is up
            self._debouncer.forget()  # every answer so far waited for this: nobody has a list to update

    async def _settle(self, connectors: tuple[UpstreamConnector | FilePromptSource, ...]) -> None:
        """Until each has connected or failed once (bounded by its timeout): the first client then sees
        the full list and the right capabilities."""
        servers = [c for c in connectors if isinstance(c, UpstreamConnector)]
        limit = max((c.settings.timeout_s for c in servers), default=0) + 1

        async def settled(connector: UpstreamConnector | FilePromptSource) -> None:
            if not isinstance(connector, UpstreamConnector):  # a directory: its scan ends (bounded), however long
                await connector.wait_settled()
                return
            with anyio.move_on_after(limit):
                await connector.wait_settled()

        async with anyio.create_task_group() as tg:
            for connector in connectors:
                tg.start_soon(settled, connector)

    async def _start_upstream(
        self, settings: StdioUpstream | HttpUpstream | FilesUpstream
    ) -> UpstreamConnector | FilePromptSource:
        gateway = self.config.gateway
        connector: UpstreamConnector | FilePromptSource
        if isinstance(settings, FilesUpstream):
            from gateway.sources.files.source import FilePromptSource  # Jinja2, YAML, watchfiles: only for files

            connector = FilePromptSource(settings, on_change=self._changed)
            scope = await self._tg.start(_run_in_scope, connector)
            self._running[settings.namespace] = _Running(settings, connector, scope)
            return connector
        connector = UpstreamConnector(
            settings,
            on_change=self._changed,
            on_stale=self._stale,
            max_message_bytes=gateway.max_message_bytes,
            backoff=Backoff(gateway.restart_initial_s, gateway.restart_max_s, gateway.max_restarts),
            max_in_flight=gateway.max_requests_per_upstream,
            on_progress=self._progress.deliver,
            stable_after_s=gateway.restart_reset_after_s,
            on_client_request=self._client_requests.forward,
        )
        scope = await self._tg.start(_run_in_scope, connector)
        self._running[settings.namespace] = _Running(settings, connector, scope)
        return connector

    def _stale(self, namespace: str) -> None:
        self.catalog.invalidate(namespace)

    def _changed(self, namespace: str) -> None:
        self.catalog.invalidate(namespace)
        self._debouncer.poke(namespace)

    @staticmethod
    def _secret_for(config: Config, previous: tuple[bytes, ...] | None) -> tuple[bytes, ...]:
        """The cursor keys: the configured ones, else one random per process (kept across reloads)."""
        return config.gateway.cursor_keys or previous or (secrets.token_bytes(32),)

    def _build_catalog(self, config: Config) -> Catalog:
        settings = config.gateway
        sep = settings.namespace_separator
        mounts = [
            Mount(
                self._running[u.namespace].connector,
                prefix=u.namespace + sep if u.prefix else "",
                rules=Rules.of(u.policy, sep),
                overrides=u.overrides,
            )
            for u in config.upstreams
            if u.namespace in self._running
        ]
        return Catalog(
            mounts,
            codec=CursorCodec(self._secret),
            generation=config.generation,
            policy=Rules.of(config.policy, sep),
            page_size=settings.page_size,
            on_upstream_error=settings.on_upstream_error,
            progress=self._progress,
            client_requests=self._client_requests,
            ttl_ms=round(settings.list_ttl_s * 1000),
        )

    async def reload(self, new: Config) -> None:
        """Apply a new config: upstreams are added, removed or restarted only where they changed."""
        if new.server != self.config.server:
            log.warning("reload_server_settings_ignored", reason="[server] changes take effect on restart")
            new = new.model_copy(update={"server": self.config.server})
        wanted = {u.namespace: u for u in new.upstreams}
        stopped = [
            ns
            for ns, running in self._running.items()
            if ns not in wanted or wanted[ns].connection != running.settings.connection
        ]
        for namespace in stopped:
            self._running.pop(namespace).scope.cancel()
        for namespace, running in self._running.items():  # a new policy or overrides: no reconnect needed
            running.settings = wanted[namespace]
        started = [await self._start_upstream(u) for u in new.upstreams if u.namespace not in self._running]
        self.config = new
        self._secret = self._secret_for(new, self._secret)
        self._debouncer.delay_s = new.gateway.list_changed_debounce_s
        self._viewers = self._token_rules(new)
        self._claim_views = ClaimViews(new.server.views, new.gateway.namespace_separator)
        self.catalog = self._build_catalog(new)
        log.info(
            "config_reloaded",
            stopped=stopped,
            started=[c.namespace for c in started],
            kept=sorted(set(wanted) - {c.namespace for c in started}),
        )
        await self._settle(tuple(started))
        self._debouncer.poke()
        await self.cluster.announce_generation(new.digest)


async def _run_in_scope(
    connector: UpstreamConnector | FilePromptSource, *, task_status: anyio.abc.TaskStatus[anyio.CancelScope]
) -> None:
    with anyio.CancelScope() as scope:
        task_status.started(scope)
        await connector.run()


@asynccontextmanager
async def run_gateway(config: Config, *, settle: bool = False) -> AsyncIterator[Gateway]:
    """The running gateway; ``settle``: only once every upstream has connected or failed once. On Linux
    it is its upstreams' subreaper: what escapes an upstream's process group is its to reap and end."""
    subreaper = orphans.become_subreaper()
    try:
        async with anyio.create_task_group() as tg:
            gateway = Gateway(config, tg)
            if subreaper:
                tg.start_soon(_reap_orphans)
            await gateway.start()
            if settle:
                await gateway.settle()
            try:
                yield gateway
            finally:
                tg.cancel_scope.cancel()
                gateway.audit.close()
    finally:
        if subreaper:  # every upstream has stopped: what they left behind goes with them
            with anyio.CancelScope(shield=True):
                await orphans.end_adopted(ORPHAN_GRACE_S)


ORPHAN_REAP_S = 10.0
ORPHAN_GRACE_S = 2.0


async def _reap_orphans() -> None:
    """Adopted orphans that exit by themselves are collected (a subreaper's zombies are its own)."""
    while True:
        await anyio.sleep(ORPHAN_REAP_S)
        await anyio.to_thread.run_sync(orphans.reap_adopted)


async def serve_stream(gateway: Gateway, stream: MessageStream, *, stopping: anyio.Event | None = None) -> None:
    """Serve one client over one frame stream (stdio) until it hangs up or ``stopping`` is set; requests
    in flight then get the shutdown grace period to answer."""
    due = anyio.Event()

    def list_changed() -> None:
        due.set()

    session = ClientSession(gateway.service, on_list_changed=list_changed, who=LOCAL)
    peer: RpcPeer | None = None

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
                await peer.notify("notifications/prompts/list_changed")
                if gateway.service.prompts_as_tools:  # get_prompt's schema names the prompts
                    await peer.notify("notifications/tools/list_changed")

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
    list_changed = encode(Notification("notifications/prompts/list_changed"))
    tools_changed = encode(Notification("notifications/tools/list_changed"))

    def announce(push: Push) -> None:
        push(list_changed, "list_changed")
        if gateway.service.prompts_as_tools:  # get_prompt's schema names the prompts
            push(tools_changed, "tools_list_changed")

    def new_session(principal: Identity | None, session_id: str, push: Push, ask: Ask) -> ClientSession:
        session = ClientSession(
            gateway.service,
            on_list_changed=lambda: announce(push),
            viewer=gateway.viewer_for(principal),
            session_id=session_id[:8],
            on_close=lambda: gateway.hub.discard(session),
            who=principal,
        )
        session.ask_client = _as_relay(ask)
        gateway.hub.add(session)
        return session

    async def stateless(request: Request, notify: Notify, principal: Identity | None) -> dict[str, Any]:
        return await gateway.service.modern(request, notify, viewer=gateway.viewer_for(principal), who=principal)

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


def connection_bounds(settings: ServerSettings) -> ConnectionBounds:
    return ConnectionBounds(
        max_connections=settings.max_connections,
        max_connections_per_client=settings.max_connections_per_client,
        max_header_bytes=settings.max_header_bytes,
        header_timeout_s=settings.header_timeout_s,
        body_timeout_s=settings.body_timeout_s,
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

    class _EmbeddedServer(uvicorn.Server):
        """uvicorn inside the gateway's task group: the gateway, not uvicorn, owns SIGTERM/SIGINT."""

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    uv_config = uvicorn.Config(
        frontend.app(gateway.metrics.routes(lambda: gateway.connectors, gateway.cluster.status)),
        log_config=None, access_log=False, lifespan="off",
        timeout_graceful_shutdown=max(1, round(grace)), server_header=False,
        http=guarded(HttpToolsProtocol, connection_bounds(settings)),  # uvicorn's llhttp protocol, behind the bounds
        proxy_headers=False,  # nothing here reads the client's address; the middleware cost a layer per request
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
    log.info("http_listening", url=f"http://{authority}{settings.path}", sse=settings.sse_path)
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
                server.should_exit = True
                with anyio.move_on_after(grace + 1):
                    await stopped.wait()
            tg.cancel_scope.cancel()
            sock.close()
