"""An upstream connector: one downstream MCP server, kept connected, behind a narrow seam.

Seam: ``request()``, ``aclose()`` (by leaving ``run()``), and change callbacks. It finds out which era
the server speaks (``eras.py``: ``protocol = "auto"`` probes with ``server/discover``; a DiscoverResult
means 2026-07-28, any other answer or none a handshake-era server, which gets ``initialize``), insists
on the ``prompts`` capability, answers pings, turns ``notifications/prompts/list_changed`` into a change
callback (a modern server sends it on a ``subscriptions/listen`` stream we hold open: ``upkeep.py``),
and restarts a crashed server with exponential backoff and jitter (``supervision.py``). Requests in
flight when the server dies fail at once. Every request is written for the server's era: the
2026-07-28 envelope in ``_meta`` for a modern one, no reserved keys for an older one. Its states and
their moves are ``upstream_states.py``'s.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypedDict

import anyio
import structlog

from gateway.config import HttpUpstream, StdioUpstream
from gateway.observability.tracing import ClientSpan, tracing
from gateway.protocol.errors import (
    UpstreamProtocolError,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from gateway.protocol.lists import EVERY_LIST, OnChange
from gateway.protocol.modern import with_envelope, without_envelope
from gateway.protocol.versions import declares_completions, is_modern
from gateway.rpc import PeerClosed, RemoteError, RequestTimeout, RpcPeer, UnusableAnswer
from gateway.sources import era_memory
from gateway.sources.backoff import Backoff
from gateway.sources.eras import EraNegotiation
from gateway.sources.stderr_log import StderrLog
from gateway.sources.supervision import STDERR_TAIL_LINES, Supervision, closed_reason
from gateway.sources.upkeep import ConnectionUpkeep
from gateway.sources.upstream_options import CLIENT_INFO, _upstream_token, destination_of, http_status
from gateway.sources.upstream_states import State, UpstreamStates, no_one
from gateway.transports.base import MessageStream

__all__ = ["State", "UpstreamConnector"]


class UpstreamBounds(TypedDict):
    """What ``[gateway]`` bounds of an upstream's connection (``UpstreamConnector.retune``)."""

    backoff: Backoff
    max_in_flight: int
    stable_after_s: float


class UpstreamConnector(Supervision, EraNegotiation, ConnectionUpkeep):
    """One upstream as the catalog sees it (its state, capabilities, ``request()``); the mixins keep it
    connected (``Supervision``), speak its era (``EraNegotiation``) and watch the connection
    (``ConnectionUpkeep``)."""

    def __init__(
        self,
        settings: StdioUpstream | HttpUpstream,
        *,
        on_change: OnChange,
        on_stale: Callable[[str], None] | None = None,
        max_message_bytes: int,
        backoff: Backoff | None = None,
        max_in_flight: int = 256,
        on_progress: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None,
        stable_after_s: float = 10.0,
        on_client_request: Callable[[object, str, dict[str, Any] | None], Awaitable[dict[str, Any]]] | None = None,
        on_state: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self._destination = destination_of(settings)
        self._upstream_token = _upstream_token(settings)
        self.namespace = settings.namespace
        self._on_change = on_change
        # cached pages may be stale, but nothing changed for clients (without its own callback: told as a change)
        self._on_stale = on_stale or (lambda namespace: on_change(namespace, EVERY_LIST))
        self._acknowledged = False  # a listen stream was acknowledged on this connection
        self._max_message_bytes = max_message_bytes
        self._backoff = backoff or Backoff()
        self._on_client_request = on_client_request
        self._stable_after_s = stable_after_s  # up this long: a later drop starts the backoff afresh
        self._ready_since: float | None = None
        self._handshake_only = False  # set once the server died on the probe
        self._guessed_handshake_only = False  # set from its stderr alone: undone if it then proves modern
        self._probe_suspected = False  # it died on the probe in this run: remembered once the handshake serves
        self._probe_cleared = False  # it died without the probe too since it last served: not the probe's doing
        self._era_key: str | None = None  # a stdio server's key in what earlier runs learnt (era_memory.py)
        if isinstance(settings, StdioUpstream) and settings.protocol == "auto":
            self._era_key = era_memory.key_of(settings.command, settings.args, settings.cwd)
            if era_memory.handshake_only(self._era_key):  # it died of the probe in an earlier run
                self._handshake_only = self._guessed_handshake_only = True
        self._stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._env_values: list[tuple[str, str]] = []
        self._in_flight = 0  # requests with the server now: over the bound, refused at once (never queued)
        self._idle: anyio.Event | None = None  # set when the last request in flight ends, while one waits for it
        self.cut_reason: str | None = None  # why its requests in flight end, when a reload ends it with them
        self._max_in_flight = max_in_flight
        self._on_progress = on_progress
        self._log = structlog.get_logger("gateway.upstream").bind(upstream=self.namespace)
        self._stderr_log = StderrLog(self._log)  # (its lines logged within a bound: stderr_log.py)
        self._peer: RpcPeer | None = None
        self._states = UpstreamStates(self.namespace, self._log, on_change, on_state)
        self.protocol_version: str | None = None
        self.probe_outcome: str | None = None  # why an auto upstream was taken for handshake-era (the log)
        self.capabilities: dict[str, Any] = {}
        self.server_info: dict[str, Any] = {}
        self.last_error: str | None = None
        self.restarts = 0
        self.recent_ms: deque[float] = deque(maxlen=100)  # the last requests' durations (the operator page)
        self._listening = False  # a modern server acknowledged our subscriptions/listen
        self._listening_skills = False  # ... with resourcesListChanged, for a relayed upstream's skills
        self._listen_scope: anyio.CancelScope | None = None
        self._stream: MessageStream | None = None  # the connection's transport, while there is one
        self._connection_tasks: anyio.abc.TaskGroup | None = None  # what lives as long as the connection

    def retune(self, *, backoff: Backoff, max_in_flight: int, stable_after_s: float) -> None:  # (UpstreamBounds)
        """New bounds from a reloaded ``[gateway]``, without a reconnect: the restart backoff, the requests
        in flight at most, how long up counts as stable. The restarts counted so far carry over (a reload
        that changed nothing of them, every few seconds, must not keep a crash loop from ``failed``)."""
        old = self._backoff
        if (backoff.initial_s, backoff.max_s, backoff.max_attempts) != (old.initial_s, old.max_s, old.max_attempts):
            backoff.attempt = old.attempt
            self._backoff = backoff
        self._max_in_flight, self._stable_after_s = max_in_flight, stable_after_s

    # ---- what the catalog sees ------------------------------------------------------------------

    @property
    def state(self) -> State:
        return self._states.state

    @property
    def ready(self) -> bool:
        return self.state == "ready" and self._peer is not None and not self._peer.closed

    @property
    def modern(self) -> bool:
        return is_modern(self.protocol_version)

    @property
    def declares_list_changed(self) -> bool:
        prompts = self.capabilities.get("prompts")
        return isinstance(prompts, dict) and prompts.get("listChanged") is True

    @property
    def offers_prompts(self) -> bool:
        """Whether it offers prompts at all (an upstream relayed for its skills alone may not)."""
        return isinstance(self.capabilities.get("prompts"), dict)

    @property
    def declares_resource_changes(self) -> bool:
        """Whether its skills' changes can be heard: relayed, with ``resources.listChanged`` declared."""
        resources = self.capabilities.get("resources")
        return self.settings.relay_skills and isinstance(resources, dict) and resources.get("listChanged") is True

    def _can_announce(self, listening: bool) -> bool:
        """Whether a message of its own can reach us: a modern server's while our listen (``listening``)
        is up, a 2025 one's while it has a stream to send on. Over HTTP that is only while its GET stream
        is open: a stateless server (the TypeScript SDK's 2025 serving) declares ``listChanged`` and never
        can send it (its listing was held, stale, until a reconnect)."""
        return listening if self.modern else bool(getattr(self._stream, "hears_server", True))

    @property
    def announces_resource_changes(self) -> bool:
        """Whether a change of its skills will be announced."""
        return self.declares_resource_changes and self._can_announce(self._listening_skills)

    @property
    def announces_list_changes(self) -> bool:
        """Whether a change of its prompts will be announced."""
        return self.declares_list_changed and self._can_announce(self._listening)

    @property
    def completes(self) -> bool:
        """Whether completion/complete may be sent (before 2025-03-26 it had no capability flag)."""
        if self.protocol_version is None:
            return False
        if not declares_completions(self.protocol_version):
            return True
        return isinstance(self.capabilities.get("completions"), dict)

    def unavailable(self) -> UpstreamUnavailable:
        """Why it cannot answer now, in the gateway's words (never the server's stderr, which the log
        and ``check`` show): still starting and for how long, down until its restart, or given up."""
        states = self._states
        now = anyio.current_time()
        if states.state == "starting":
            restart = f", restart {self.restarts}" if self.restarts else ""
            return UpstreamUnavailable(self.namespace, f"is still starting (for {now - states.since:.1f} s{restart})")
        if states.state == "backing-off":
            retry = "" if states.retry_at is None else f"; it is restarted in {max(0.0, states.retry_at - now):.1f} s"
            return UpstreamUnavailable(self.namespace, f"is down (for {now - states.since:.1f} s){retry}")
        if states.state == "failed" and self.settings.unresolved is not None:
            return UpstreamUnavailable(self.namespace, f"is not started: {self.settings.unresolved}")
        if states.state == "failed":
            return UpstreamUnavailable(
                self.namespace, "has failed and is not restarted (`prompt-gateway check` and the log say why)"
            )
        if states.state == "stopped":
            return UpstreamUnavailable(self.namespace, "is stopped")
        return UpstreamUnavailable(self.namespace, "is not connected (its connection has just ended)")

    async def request(
        self, method: str, params: dict[str, Any] | None, *, check: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Send a request. Where the server lost our session (it restarted), the connection is made
        afresh and the request tried once more: every method sent upstream only reads. ``check`` judges
        the answer inside the request's CLIENT span, so an answer refused for what it holds (a relayed
        skill file not matching its manifest) fails that span with its own ``error.type``."""
        stream = self._stream
        try:
            return await self._request_once(method, params, check)
        except UpstreamUnavailable:
            if stream is None or not getattr(stream, "session_lost", False):
                raise
            with anyio.move_on_after(self.settings.timeout_s):
                while self._stream is stream or not self.ready:
                    await self._states.ready_again()
            return await self._request_once(method, params, check)

    async def _request_once(
        self, method: str, params: dict[str, Any] | None, check: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        peer, stream = self._peer, self._stream
        if peer is None or not self.ready:
            raise self.unavailable()
        if self._in_flight >= self._max_in_flight:  # refused now rather than queued without limit
            raise UpstreamUnavailable(self.namespace, f"is saturated ({self._max_in_flight} requests in flight)")
        self._in_flight += 1
        started = time.perf_counter()
        try:
            with tracing().client(method, params, to=self._destination, mcp_version=self.protocol_version) as span:
                answer = await self._exchange(peer, stream, method, span.inject(self._for_server(params)), span)
                if check is not None:
                    check(answer)
                return answer
        finally:
            self._in_flight -= 1
            self.recent_ms.append((time.perf_counter() - started) * 1000)
            if self._idle is not None and not self._in_flight:
                self._idle.set()

    async def _exchange(
        self, peer: RpcPeer, stream: Any, method: str, params: dict[str, Any] | None, span: ClientSpan
    ) -> dict[str, Any]:
        """One request on the connection, what went wrong said as the upstream's error."""
        try:
            return await peer.request(method, params, timeout=self.settings.timeout_s, on_sent=span.sent)
        except UnusableAnswer as exc:
            raise UpstreamProtocolError(
                self.namespace, f"answered {method} with a value that cannot be relayed: {exc.problem}"
            ) from exc
        except RemoteError as exc:
            status = http_status(exc)
            if status is not None:
                raise UpstreamUnavailable(self.namespace, f"answered {method} with HTTP {status}") from exc
            raise UpstreamRejected(self.namespace, exc.error) from exc
        except PeerClosed as exc:
            reason = self.cut_reason or closed_reason(stream)
            raise UpstreamUnavailable(self.namespace, reason or "went away before answering") from exc
        except RequestTimeout as exc:
            message = f"did not answer {method} within {self.settings.timeout_s}s"
            raise UpstreamTimeout(self.namespace, message) from exc

    def _for_server(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        if self.modern:
            assert self.protocol_version is not None  # noqa: S101 - modern implies a version
            return with_envelope(params, version=self.protocol_version, client_info=CLIENT_INFO)
        return without_envelope(params)

    async def moved(self) -> None:
        """Until its state next moves, or its ready connection is lost (``retiring.hand_over``)."""
        await self._states.moved()

    @property
    def serving(self) -> bool:
        """Ready, and its connection not known to be lost."""
        return self._states.serving and self.ready

    @property
    def in_flight(self) -> int:
        """Requests with the server now."""
        return self._in_flight

    def mute(self) -> None:
        """A reload replaced this connection or removed the upstream: what it says of its prompts, skills
        and states is no one's news (another connection, or none, speaks for its namespace now). Its
        requests in flight still hear their progress, and questions asked of the client still reach it."""
        self._on_change = self._on_stale = no_one
        self._log = self._log.bind(retiring=True)  # (its successor logs under the same name)
        self._stderr_log = StderrLog(self._log)
        self._states.mute(self._log)

    async def drained(self) -> None:
        """Until no request is in flight (a reload lets those finish before it ends the connection)."""
        while self._in_flight:
            self._idle = anyio.Event()
            await self._idle.wait()
        self._idle = None

    async def wait_settled(self) -> None:
        """Until the first connection attempt has either succeeded or failed."""
        await self._states.settled()
