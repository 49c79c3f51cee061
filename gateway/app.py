"""The composition root: builds upstream connectors, the catalog and the hub from a Config, owns the
one task group everything runs in, and applies a new Config in place (hot reload).

Leaving ``run_gateway`` stops every upstream (child processes included). ``Gateway.reload``
(``reloading.py``) replaces only the upstreams whose settings changed, the old connection serving until
its successor is ready, rebuilds the catalog (policy, page size, cursor layout), keeps every client
session connected and tells them all that the list changed.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import structlog
from anyio.abc import TaskGroup

from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.mounts import Mount
from gateway.catalog.policy import Rules, Viewer
from gateway.cluster.replicas import NoCluster, RedisCluster
from gateway.config import Config, FilesUpstream, HttpUpstream, StdioUpstream
from gateway.frontend.debounce import ListChangedDebouncer
from gateway.frontend.hub import Hub
from gateway.frontend.service import PromptService
from gateway.identity.audit import AuditTrail
from gateway.identity.principal import Identity
from gateway.identity.rate_limits import Counts, RateLimits
from gateway.identity.views import ClaimViews
from gateway.observability import tracing
from gateway.observability.metrics import Metrics
from gateway.observability.starting import start_telemetry
from gateway.protocol.lists import EVERY_LIST, Lists
from gateway.reloading import Reloading, Running
from gateway.sources.backoff import Backoff
from gateway.sources.client_requests import ClientRequestRelay
from gateway.sources.progress import ProgressRelay
from gateway.sources.upstream import UpstreamBounds, UpstreamConnector
from gateway.transports import orphans

if TYPE_CHECKING:
    from gateway.sources.files.source import FilePromptSource

log = structlog.get_logger("gateway.app")

FRONT_END_WAIT_S = 2.0
"""How long the upstreams wait for a front end that said it would serve first (it takes milliseconds)."""

CLIENT_REQUEST_TIMEOUT_S = 600.0
"""How long a client may take to answer a request relayed from an upstream (a person may be answering)."""


NO_VIEW = Rules()
"""A person whose access token matches no view: nothing narrows the global policy, but what they see may
differ from what others with views see, so it is no listing a shared cache may hand on (``cacheScope:
private``, as for a token without a policy); a reviewer's "eng" got ``public`` beside "sales"' private."""


class Gateway(Reloading):
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
        self._running: dict[str, Running] = {}
        self._serving_old: dict[str, Running] = {}
        self._reloaded = anyio.Event()
        self._secret = self._secret_for(config, None)
        self._viewers = self._token_rules(config)
        self._claim_views = ClaimViews(config.server.views, config.gateway.namespace_separator)
        self.catalog = self._build_catalog(config)
        self._limit_counts = Counts(config.cluster.redis_url, config.limits.storage_timeout_s)
        self.rate_limits = self._rate_limits(config)
        keep = config.server.admin.recent_audit_events if config.server.admin.enabled else 0
        self.audit = AuditTrail(config.server.audit, keep_recent=keep)
        self._states_changed = anyio.Event()
        self.states_version = 0
        """Counts upstream changes and reloads: what the operator page compares with what it showed."""
        self.service = PromptService(
            self.current_catalog,
            completions=self.offers_completions,
            hub=self.hub,
            metrics=self.metrics,
            warm_up=self.first_attempts,
            audit=self.audit,
            prompts_as_tools=config.server.prompts_as_tools,
            limits=lambda: self.rate_limits,
        )
        self._warm = False
        self._warm_until = 0.0
        self._serving = anyio.Event()
        self.cluster: NoCluster | RedisCluster = NoCluster()  # the HTTP front end's, with [cluster] redis_url
        self.metrics.watch(lambda: self.connectors, lambda: len(self.hub))

    # ---- what the front ends use --------------------------------------------------------------

    @property
    def connectors(self) -> tuple[UpstreamConnector | FilePromptSource, ...]:
        """Each upstream's connection that serves (while a reload hands one over: the old one)."""
        return tuple(self._serving_connection(u.namespace).connector for u in self.config.upstreams)

    def _serving_connection(self, namespace: str) -> Running:
        return self._serving_old.get(namespace) or self._running[namespace]

    def offers_completions(self) -> bool:
        """Whether ``completions`` is declared: when any configured upstream could offer them. A session
        keeps what its ``initialize`` was told, so an upstream still starting counts: it may offer them
        later in that session. Each prompt is then answered as its own upstream can (docs/protocol.md)."""
        return any(_could_complete(c) for c in self.connectors)

    def current_catalog(self) -> Catalog:
        return self.catalog

    def viewer_for(self, identity: Identity | None) -> Viewer | None:
        """A static token's policy, or the views an access token's claims match (None: the global policy alone)."""
        if identity is None:
            return None
        if identity.kind == "oauth":  # matching no view: the global policy's list, private all the same
            return self._claim_views.viewer_for(identity.claims or {}) or NO_VIEW
        if identity.kind == "token":
            return self._viewers.get(identity.name)
        return None

    def _rate_limits(self, config: Config) -> RateLimits:
        """The limits of ``config``, counted where the counts so far are (a reload keeps them)."""
        if config.cluster.redis_url != self._limit_counts.redis_url:
            replaced = self._limit_counts
            self._limit_counts = Counts(config.cluster.redis_url, config.limits.storage_timeout_s)
            self._tg.start_soon(replaced.aclose)  # the old Redis's connections are not left open
        self._limit_counts.timeout_s = config.limits.storage_timeout_s
        return RateLimits(config.limits, self._limit_counts, tokens=config.server.tokens, views=config.server.views)

    async def close_limit_counts(self) -> None:
        """The rate limits' Redis connections, closed at the stop (never made where no limit is set)."""
        await self._limit_counts.aclose()

    @staticmethod
    def _token_rules(config: Config) -> dict[str, Rules]:
        """Each token's policy, compiled once per config rather than once per session."""
        sep = config.gateway.namespace_separator
        return {t.name: Rules.of(t.policy, sep) for t in config.server.tokens}

    # ---- lifetime -----------------------------------------------------------------------------

    async def start(self, *, front_end_first: bool = False) -> None:
        """Start every upstream and return at once: clients are served from now on, whatever the
        upstreams do (an upstream that comes up later is announced with list_changed). With
        ``front_end_first`` the upstream processes start once a front end says it is serving
        (``serving``): a client that started the gateway is answered first, not behind a crowd of
        servers starting at once on the same cores."""
        self._warm_until = anyio.current_time() + self.config.gateway.startup_wait_s
        if not front_end_first:
            self._serving.set()
        for upstream in self.config.upstreams:
            self._start_upstream(upstream)
        self.catalog = self._build_catalog(self.config)
        self._tg.start_soon(self._announce_changes)
        # a list, not a mapping by namespace: redaction blanks a key named like a secret ("secrets", "token")
        log.info("gateway_started", upstreams=[{"upstream": c.namespace, "state": c.state} for c in self.connectors])

    def serving(self) -> None:
        """A front end reads its first requests now: the upstreams may start."""
        self._serving.set()

    async def _announce_changes(self) -> None:
        """Changes are announced once start-up's wait is over: until then every listing waits for it, so a
        change before it is news to nobody (no client has a list to update)."""
        await self.first_attempts()
        await self._debouncer.run()

    async def settle(self) -> None:
        """Until every upstream has connected or failed once (``check`` and ``list`` report that state)."""
        await self._settle(self.connectors)

    async def first_attempts(self) -> None:
        """The first listings (and gets, completions) wait up to ``startup_wait_s`` after start for upstreams
        still in their first attempt, so a client starting with the gateway that never re-lists sees the
        whole list; later ones never wait, and ``initialize`` never does."""
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

    def _start_upstream(
        self, settings: StdioUpstream | HttpUpstream | FilesUpstream
    ) -> UpstreamConnector | FilePromptSource:
        """The upstream's connector, in place at once (its state "starting"); it runs once a front end
        serves (at once after start-up)."""
        connector = self._connector_for(settings)
        scope = anyio.CancelScope()
        self._running[settings.namespace] = Running(settings, connector, scope)
        self._tg.start_soon(self._run_when_serving, connector, scope)
        return connector

    async def _run_when_serving(
        self, connector: UpstreamConnector | FilePromptSource, scope: anyio.CancelScope
    ) -> None:
        with scope:
            with anyio.move_on_after(FRONT_END_WAIT_S):
                await self._serving.wait()
            await connector.run()

    def _connector_for(
        self, settings: StdioUpstream | HttpUpstream | FilesUpstream
    ) -> UpstreamConnector | FilePromptSource:
        if isinstance(settings, FilesUpstream):
            from gateway.sources.files.source import FilePromptSource  # Jinja2, YAML, watchfiles: only for files

            return FilePromptSource(settings, on_change=self._changed)
        return UpstreamConnector(
            settings,
            on_change=self._changed,
            on_stale=self._stale,
            max_message_bytes=self.config.gateway.max_message_bytes,
            on_progress=self._progress.deliver,
            on_client_request=self._client_requests.forward,
            on_state=lambda _namespace: self._announce_change(),
            **self._bounds_for(settings),
        )

    def _bounds_for(self, settings: StdioUpstream | HttpUpstream | FilesUpstream) -> UpstreamBounds:
        """What ``[gateway]`` bounds of an upstream's connection: set at its start, and again at a reload."""
        gateway = self.config.gateway
        return {
            "backoff": Backoff(gateway.restart_initial_s, gateway.restart_max_s, gateway.max_restarts),
            "max_in_flight": getattr(settings, "max_in_flight", None) or gateway.max_requests_per_upstream,
            "stable_after_s": gateway.restart_reset_after_s,
        }

    def _stale(self, namespace: str) -> None:
        self.catalog.invalidate(namespace)

    def _changed(self, namespace: str, lists: Lists = EVERY_LIST) -> None:
        """An upstream's ``lists`` changed (none: what it serves may read otherwise, its lists did not)."""
        self.catalog.invalidate(namespace)
        if lists:
            self._debouncer.poke(namespace, lists)
        self._announce_change()

    def _announce_change(self) -> None:
        self.states_version += 1
        self._states_changed.set()
        self._states_changed = anyio.Event()

    async def states_changed(self) -> None:
        """Until an upstream's state changes, or its prompts change, or the config is reloaded (the
        operator page's live states and catalog)."""
        await self._states_changed.wait()

    @staticmethod
    def _secret_for(config: Config, previous: tuple[bytes, ...] | None) -> tuple[bytes, ...]:
        """The cursor keys: the configured ones, else one random per process (kept across reloads)."""
        return config.gateway.cursor_keys or previous or (secrets.token_bytes(32),)

    def _build_catalog(self, config: Config) -> Catalog:
        settings = config.gateway
        sep = settings.namespace_separator
        mounts = [
            Mount(
                self._serving_connection(u.namespace).connector,  # (while a reload hands one over: reloading.py)
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


def _could_complete(source: UpstreamConnector | FilePromptSource) -> bool:
    """A files upstream answers completions (from its prompts' ``values``); a server, as its last handshake
    said, or perhaps if it was never heard from yet; one that gave up offers nothing until a reload."""
    if source.state in ("failed", "stopped"):
        return False
    return source.completes or source.protocol_version is None


@asynccontextmanager
async def run_gateway(
    config: Config, *, settle: bool = False, telemetry: bool = False, front_end_first: bool = False
) -> AsyncIterator[Gateway]:
    """The running gateway; ``settle``: only once every upstream has connected or failed once;
    ``front_end_first``: its upstreams start once the front end calls ``Gateway.serving``. On Linux it is
    its upstreams' subreaper: what escapes an upstream's process group is its to reap and end."""
    subreaper = orphans.become_subreaper()
    traced = start_telemetry(config.telemetry) if telemetry else None  # serving only: not check, list, render
    try:
        async with anyio.create_task_group() as tg:
            gateway = Gateway(config, tg)
            if subreaper:
                tg.start_soon(_reap_orphans)
            await gateway.start(front_end_first=front_end_first and not settle)
            if settle:
                await gateway.settle()
            try:
                yield gateway
            finally:
                tg.cancel_scope.cancel()
                gateway.audit.close()
                with anyio.CancelScope(shield=True):
                    await gateway.close_limit_counts()
    finally:
        with anyio.CancelScope(shield=True):
            if subreaper:  # every upstream has stopped: what they left behind goes with them
                await orphans.end_adopted(ORPHAN_GRACE_S)
            if traced is not None:  # what is buffered is exported, within the grace
                tracing.install(tracing.NoTracing())
                await anyio.to_thread.run_sync(traced.shutdown, config.gateway.shutdown_grace_s)


ORPHAN_REAP_S = 10.0
ORPHAN_GRACE_S = 0.5
"""After SIGTERM, then after SIGKILL, for what the upstreams left: short, as the whole stop must be (child_stop.py)."""


async def _reap_orphans() -> None:
    """Adopted orphans that exit by themselves are collected (a subreaper's zombies are its own)."""
    while True:
        await anyio.sleep(ORPHAN_REAP_S)
        if orphans.may_have_adopted():  # (else nothing to reap: no worker thread either)
            await anyio.to_thread.run_sync(orphans.reap_adopted)
