"""A new config applied in place (``Gateway.reload``: ``SIGHUP``, ``serve --watch``): the gateway's part
that moves from one config to the next, apart from what builds each piece (``app.py``).

Upstreams are started, stopped or replaced only where their connection settings changed. A replaced
upstream's new connection starts at once; the old one, if it was serving, goes on serving every request
until the new one is ready, as a rolling deployment keeps the old version until the new one is up: a
reload that restarts a server costs its clients no gap ("still starting", its prompts missing from a
listing), and one whose new settings do not work (a mistyped command) leaves the old connection serving
while the new one's failures are logged. Then the catalog takes the new connection, clients are told, and
the old one's requests in flight get up to ``shutdown_grace_s`` to finish before it is stopped
(``sources/retiring.py``). The old one stops serving sooner if its own connection is lost (its restart
would only bring back the settings the reload replaced); a later reload that brings its settings back
keeps it, and one that removes the upstream ends it. An upstream removed leaves the catalog at once, its
requests in flight finishing the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import structlog
from anyio.abc import TaskGroup

from gateway.catalog.catalog import Catalog
from gateway.catalog.policy import Rules, Viewer
from gateway.cluster.replicas import NoCluster, RedisCluster
from gateway.config import Config, FilesUpstream, HttpUpstream, ServerSettings, StdioUpstream, TokenSettings
from gateway.frontend.debounce import ListChangedDebouncer
from gateway.frontend.hub import Hub
from gateway.identity.principal import Identity
from gateway.identity.rate_limits import RateLimits
from gateway.identity.views import ClaimViews
from gateway.sources.retiring import hand_over, retire
from gateway.sources.upstream import UpstreamBounds, UpstreamConnector

if TYPE_CHECKING:
    from gateway.sources.files.source import FilePromptSource

log = structlog.get_logger("gateway.app")

RESTART_ONLY = ("max_message_bytes", "max_requests_per_session", "shutdown_grace_s")
"""``[gateway]`` settings a reload keeps as they were (a warning says so): the front end's bounds and the
stop's grace are set as it starts."""


@dataclass
class Running:
    """An upstream the gateway runs: its settings, its connector, the scope its run ends with."""

    settings: StdioUpstream | HttpUpstream | FilesUpstream
    connector: UpstreamConnector | FilePromptSource
    scope: anyio.CancelScope


def server_on_reload(running: ServerSettings, new: ServerSettings) -> tuple[ServerSettings, list[str]]:
    """The ``[server]`` a reload runs with, and the keys it leaves for a restart. Each running token's
    policy and rate (a token of the same name and secret in the new config) and the views apply at once:
    they decide what is shown, not how the front end listens or whom it lets in (a tester saw a token's
    new deny ignored; a reviewer, every token's, where one token was added beside it). Tokens added,
    removed or given a new secret, and everything else, take effect on restart."""
    wanted = {(t.name, t.token): t for t in new.tokens}
    tokens = tuple(  # a tuple, as the config holds them
        t.model_copy(update={"policy": n.policy, "rate": n.rate}) if (n := wanted.get((t.name, t.token))) else t
        for t in running.tokens
    )
    applied = running.model_copy(update={"views": new.views, "tokens": tokens})
    return applied, [key for key in type(new).model_fields if _differs(key, applied, new)]


def _differs(key: str, applied: ServerSettings, new: ServerSettings) -> bool:
    """Whether a ``[server]`` key of the new config is not what runs; the tokens in any order (a reviewer:
    two tokens swapped in the file were said to wait for a restart)."""
    if key == "tokens":
        return sorted(applied.tokens, key=_token_key) != sorted(new.tokens, key=_token_key)
    return bool(getattr(applied, key) != getattr(new, key))


def _token_key(token: TokenSettings) -> tuple[str, str]:
    return token.name, token.token


class Reloading:
    """``Gateway.reload`` and the replacing of upstreams it starts; the gateway's attributes it reads
    and sets (``Gateway`` builds each piece)."""

    config: Config
    catalog: Catalog
    cluster: NoCluster | RedisCluster
    rate_limits: RateLimits
    _running: dict[str, Running]
    _serving_old: dict[str, Running]
    """Namespaces whose replaced connection serves on until its successor is ready (above)."""
    _reloaded: anyio.Event
    """Set (and replaced) at each reload: a hand-over's successor may have changed."""
    _tg: TaskGroup
    _debouncer: ListChangedDebouncer
    _secret: tuple[bytes, ...]
    _viewers: dict[str, Rules]
    _claim_views: ClaimViews
    hub: Hub

    if TYPE_CHECKING:  # the gateway's (declared only: never in its way at run time)

        def viewer_for(self, identity: Identity | None) -> Viewer | None: ...

        def _start_upstream(
            self, settings: StdioUpstream | HttpUpstream | FilesUpstream
        ) -> UpstreamConnector | FilePromptSource: ...

        def _bounds_for(self, settings: StdioUpstream | HttpUpstream | FilesUpstream) -> UpstreamBounds: ...

        @staticmethod
        def _secret_for(config: Config, previous: tuple[bytes, ...] | None) -> tuple[bytes, ...]: ...

        @staticmethod
        def _token_rules(config: Config) -> dict[str, Rules]: ...

        def _build_catalog(self, config: Config) -> Catalog: ...

        def _rate_limits(self, config: Config) -> RateLimits: ...

        def _announce_change(self) -> None: ...

    async def reload(self, new: Config) -> None:
        """Apply a new config: upstreams are added, removed or replaced only where they changed."""
        server, ignored = server_on_reload(self.config.server, new.server)
        if ignored:
            keys = [f"server.{key}" for key in ignored]
            log.warning("reload_server_settings_ignored", settings=keys, reason="they take effect on restart")
        new = new.model_copy(update={"server": server})
        kept = {  # what the front end (and uvicorn's stop) took as they started
            key: getattr(self.config.gateway, key)
            for key in RESTART_ONLY
            if getattr(new.gateway, key) != getattr(self.config.gateway, key)
        }
        for key in kept:
            log.warning("reload_setting_ignored", setting=f"gateway.{key}", reason="takes effect on restart")
        if kept:
            new = new.model_copy(update={"gateway": new.gateway.model_copy(update=kept)})
        unchanged = new == self.config  # a comment, a key's order, a file saved again: nobody is told
        wanted = {u.namespace: u for u in new.upstreams}
        taken_back = self._settle_hand_overs(wanted)
        stopped = [
            ns
            for ns, running in self._running.items()
            if ns not in wanted or wanted[ns].connection != running.settings.connection
        ]
        for namespace in stopped:
            old = self._running.pop(namespace)
            # (an earlier connection may serve still: that one goes on until this reload's is ready)
            serves_on = namespace in wanted and namespace not in self._serving_old and old.connector.ready
            if serves_on:
                self._serving_old[namespace] = old
            self._tg.start_soon(self._replace, namespace, old, serves_on)
        self.config = new  # (what the upstreams started below, and the kept ones' new bounds, are made from)
        for namespace, running in self._running.items():  # a new policy or overrides: no reconnect needed
            running.settings = wanted[namespace]
            if isinstance(running.connector, UpstreamConnector):  # [gateway]'s restart and in-flight bounds
                running.connector.retune(**self._bounds_for(running.settings))
        started = [self._start_upstream(u) for u in new.upstreams if u.namespace not in self._running]
        self._secret = self._secret_for(new, self._secret)
        self._debouncer.delay_s = new.gateway.list_changed_debounce_s
        self._viewers = self._token_rules(new)
        self._claim_views = ClaimViews(new.server.views, new.gateway.namespace_separator)
        self.hub.review_viewers(self.viewer_for)  # open sessions and listens: by the new policies
        self.catalog = self._build_catalog(new)
        self.rate_limits = self._rate_limits(new)
        log.info(
            "config_reloaded",
            stopped=stopped,
            started=[c.namespace for c in started],
            kept=sorted(set(wanted) - {c.namespace for c in started}),
            serving_until_replaced=sorted(self._serving_old),
            taken_back=taken_back,
            unchanged=unchanged,
        )
        self._reloaded.set()
        self._reloaded = anyio.Event()
        # Told at once (a policy, a removed or renamed upstream): an upstream started here is announced
        # when it is ready, as any other. Waiting for those to settle held back every session's
        # list_changed, the next reload and a SIGTERM for up to their timeout_s. A config that reads as
        # the running one changes no list (a tester's comment sent every session list_changed).
        if not unchanged:
            self._debouncer.poke()
        self._announce_change()
        await self.cluster.announce_generation(new.digest)

    def _settle_hand_overs(self, wanted: Mapping[str, StdioUpstream | HttpUpstream | FilesUpstream]) -> list[str]:
        """Hand-overs a new config ends: an upstream removed stops serving from its old connection too;
        one whose settings are back to what its old connection runs keeps that one (its successor is
        stopped instead: a third process would hold what the first holds, a port or a lock). Those kept."""
        taken_back = []
        for namespace, old in list(self._serving_old.items()):
            if namespace not in wanted:
                del self._serving_old[namespace]
            elif wanted[namespace].connection == old.settings.connection:
                del self._serving_old[namespace]
                successor = self._running.pop(namespace)
                self._running[namespace] = old
                self._tg.start_soon(retire, successor.connector, successor.scope, self.config.gateway.shutdown_grace_s)
                taken_back.append(namespace)
        return taken_back

    def replacements(self) -> dict[str, UpstreamConnector | FilePromptSource]:
        """Each upstream a reload is replacing, by name: its successor, not serving yet (a tester's
        mistyped command showed nowhere but in the log while the old connection served on)."""
        return {namespace: self._running[namespace].connector for namespace in self._serving_old}

    def _connection_of(self, namespace: str) -> UpstreamConnector | FilePromptSource | None:
        running = self._running.get(namespace)
        return None if running is None else running.connector

    async def _reload_done(self) -> None:
        await self._reloaded.wait()

    async def _replace(self, namespace: str, old: Running, serves_on: bool) -> None:
        """Stop ``old``: where it ``serves_on``, once its successor is ready (the catalog then takes that
        one); then once its requests in flight are answered, within the grace."""
        if serves_on:
            await hand_over(old.connector, lambda: self._connection_of(namespace), self._reload_done)
            if self._running.get(namespace) is old:
                return  # taken back by a later reload
            if self._serving_old.get(namespace) is old:
                del self._serving_old[namespace]
                self.catalog = self._build_catalog(self.config)
                log.info("upstream_replaced", upstream=namespace)
                self._debouncer.poke(namespace)
                self._announce_change()
        await retire(old.connector, old.scope, self.config.gateway.shutdown_grace_s)
