"""An upstream connector: one downstream MCP server, kept connected, behind a narrow seam.

Seam: ``request()``, ``aclose()`` (by leaving ``run()``), and change callbacks. It finds out which era
the server speaks (``protocol = "auto"``: probe with ``server/discover``; a DiscoverResult means
2026-07-28, any other answer or none means a handshake-era server, which gets ``initialize``),
insists on the ``prompts`` capability, answers pings, turns ``notifications/prompts/list_changed``
into a change callback (a modern server sends it on a ``subscriptions/listen`` stream we hold open),
and restarts a crashed server with exponential backoff and jitter. Requests in flight when the server
dies fail at once. Every request is written for the server's era: the 2026-07-28 envelope in
``_meta`` for a modern one, no reserved keys for an older one.

States (the whole machine lives in ``_TRANSITIONS``):
    starting ─► ready ─► backing-off ─► starting ...
        └──────────────► failed (gave up: bad handshake, or too many restarts)
    any ─► stopped (gateway shutting down)
"""

from __future__ import annotations

import random
import re
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

import anyio
import structlog
from pydantic import ValidationError

from gateway import __version__
from gateway.config import HttpUpstream, StdioUpstream
from gateway.sources.client_requests import ADVERTISED_TO_UPSTREAMS, RELAYED

if TYPE_CHECKING:
    from gateway.transports.client_credentials import UpstreamToken
    from gateway.transports.http_options import HttpOptions
from gateway.protocol.errors import (
    UNSUPPORTED_PROTOCOL_VERSION,
    MethodNotFound,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from gateway.protocol.jsonrpc import Notification, Request
from gateway.protocol.models import DiscoverResult, InitializeResult, describe
from gateway.protocol.modern import RECOGNIZED_MODERN_ERRORS, SERVER_INFO_KEY, with_envelope, without_envelope
from gateway.protocol.versions import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    declares_completions,
    is_modern,
)
from gateway.rpc import Notify, PeerClosed, RemoteError, RequestTimeout, RpcPeer, UnusableAnswer
from gateway.transports.base import MessageStream
from gateway.transports.stdio import ChildSpec, open_child

State = Literal["starting", "ready", "backing-off", "failed", "stopped"]

_TRANSITIONS: dict[State, frozenset[State]] = {
    "starting": frozenset({"ready", "backing-off", "failed", "stopped"}),
    "ready": frozenset({"backing-off", "failed", "stopped"}),
    "backing-off": frozenset({"starting", "stopped"}),
    "failed": frozenset({"stopped"}),
    "stopped": frozenset(),
}


@runtime_checkable
class VersionedStream(Protocol):
    """A transport that must repeat the negotiated revision on every message (HTTP's header)."""

    def set_protocol_version(self, version: str | None) -> None: ...


def _set_version(stream: MessageStream, version: str | None) -> None:
    if isinstance(stream, VersionedStream):
        stream.set_protocol_version(version)


PROBE_PATIENCE_S = 10.0
"""How long the ``server/discover`` probe is waited for alone before the handshake is tried beside it (a
server that ignores requests before ``initialize`` never answers: the spec's legacy server). The probe
itself stays pending for the upstream's whole ``timeout_s``: an answer that comes late still counts."""

STDERR_TAIL_LINES = 5
HEALTH_CHECK_S = 5.0
REMOTE_RETRY_MAX_S = 5.0
"""A remote upstream that is down is tried again at least this often, whatever ``restart_max_s`` says:
back within seconds of the server listening again."""
"""How often a remote upstream is asked whether it is still there."""
_CRASH = re.compile(r"Traceback \(most recent call last\)|validation errors? for |^\w*Error: ")
"""A line a Python server writes to stderr as it crashes (what mcp <= 1.8.1 servers print on the
probe, and then wait for the next line before exiting)."""


async def _first_of(*events: anyio.Event) -> None:
    """Until one of the events is set."""
    async with anyio.create_task_group() as tg:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(wait, event)


def _closed_reason(stream: MessageStream | None) -> str | None:
    reason = getattr(stream, "closed_reason", None)
    return reason if isinstance(reason, str) else None


CLIENT_INFO = {"name": "mcp-prompt-gateway", "version": __version__}


def _connection_failures() -> tuple[type[BaseException], ...]:
    """What ends a connection (and is retried): OS and upstream errors, and the HTTP client's when it is
    loaded. The HTTP modules (aiohttp, its TLS context) load only with the first HTTP upstream, so a
    gateway of stdio upstreams starts without them."""
    http = sys.modules.get("gateway.transports.http_client")
    if http is None:
        return (OSError, UpstreamError)
    return (OSError, UpstreamError, http.HttpTransportError, *http.HTTP_ERRORS)


def _upstream_token(settings: StdioUpstream | HttpUpstream) -> UpstreamToken | None:
    """The gateway's own token for an upstream that asks for one (``oauth``), kept across reconnects."""
    if not isinstance(settings, HttpUpstream) or settings.oauth is None:
        return None
    from gateway.transports.client_credentials import ClientCredentialsGrant, UpstreamToken

    oauth = settings.oauth
    grant = ClientCredentialsGrant(
        token_url=oauth.token_url,
        client_id=oauth.client_id,
        client_secret=oauth.client_secret,
        resource=oauth.resource or settings.url,
        scope=oauth.scope,
    )
    return UpstreamToken(grant, _http_options(settings))


def _env_file(settings: StdioUpstream) -> dict[str, str]:
    """The variables of the upstream's ``env_file`` (dotenv syntax, read by python-dotenv), read anew at
    each start so an edited file takes effect with the next restart."""
    if settings.env_file is None:
        return {}
    from dotenv import dotenv_values

    try:
        with open(settings.env_file, encoding="utf-8") as source:
            values = dotenv_values(stream=source)
    except OSError as exc:
        raise UpstreamUnavailable(
            settings.namespace, f"cannot read its env_file {settings.env_file}: {exc.strerror}"
        ) from exc
    return {key: value for key, value in values.items() if value is not None}


def _http_options(settings: HttpUpstream) -> HttpOptions:
    from gateway.transports.http_options import HttpOptions

    return HttpOptions(
        timeout_s=settings.timeout_s,
        headers=settings.headers,
        connect_timeout_s=settings.connect_timeout_s,
        read_timeout_s=settings.read_timeout_s,
        proxy=settings.proxy,
        verify=settings.verify,
        ca_file=settings.ca_file,
        client_cert=settings.client_cert,
        client_key=settings.client_key,
    )


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class HandshakeFailed(Exception):
    """The server answered, but not as a prompt server we can use: retrying will not help."""


class DiedOnProbe(UpstreamUnavailable):
    """The server exited on the ``server/discover`` probe or right after it, as Python SDK servers up to
    mcp 1.8.1 do (a validation error ends their stdio loop): restarted at once, spoken to with the
    handshake only from then on."""


class _ModernOnly(Exception):
    """``initialize`` was refused with the modern revisions' unsupported-version error."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message")))
        self.error = error


class Backoff:
    """Exponential backoff with full jitter, capped; resets after a connection that stayed up."""

    def __init__(self, initial_s: float = 0.5, max_s: float = 30.0, max_attempts: int | None = None) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self.max_attempts = max_attempts
        self.attempt = 0

    def next_delay(self) -> float | None:
        """Seconds to wait before the next attempt, or None to give up."""
        self.attempt += 1
        if self.max_attempts is not None and self.attempt > self.max_attempts:
            return None
        ceiling = min(self.max_s, self.initial_s * 2 ** (self.attempt - 1))
        return random.uniform(ceiling / 2, ceiling)  # noqa: S311 - jitter, not cryptography

    def reset(self) -> None:
        self.attempt = 0


class _Probe:
    """The ``server/discover`` probe running beside the handshake: its outcome, once it has one."""

    def __init__(self) -> None:
        self.settled = anyio.Event()
        self._outcome: DiscoverResult | BaseException | None = None

    async def run(self, discover: Callable[[], Awaitable[DiscoverResult | None]]) -> None:
        try:
            self._outcome = await discover()
        except (HandshakeFailed, UpstreamError) as exc:
            self._outcome = exc
        self.settled.set()

    def result(self) -> DiscoverResult | None:
        """The DiscoverResult, None for a legacy server; what the probe raised is raised here."""
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome


class UpstreamConnector:
    def __init__(
        self,
        settings: StdioUpstream | HttpUpstream,
        *,
        on_change: Callable[[str], None],
        on_stale: Callable[[str], None] | None = None,
        max_message_bytes: int,
        backoff: Backoff | None = None,
        max_in_flight: int = 256,
        on_progress: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None,
        stable_after_s: float = 10.0,
        on_client_request: Callable[[str, str, dict[str, Any] | None], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        self.settings = settings
        self._upstream_token = _upstream_token(settings)
        self.namespace = settings.namespace
        self._on_change = on_change
        self._on_stale = on_stale or on_change  # cached pages may be stale, but nothing changed for clients
        self._acknowledged = False  # a listen stream was acknowledged on this connection
        self._max_message_bytes = max_message_bytes
        self._backoff = backoff or Backoff()
        self._on_client_request = on_client_request
        self._stable_after_s = stable_after_s  # up this long: a later drop starts the backoff afresh
        self._ready_since: float | None = None
        self._handshake_only = False  # set once the server died on the probe
        self._guessed_handshake_only = False  # set from its stderr alone: undone if it then proves modern
        self._stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._slots = anyio.Semaphore(max_in_flight)
        self._max_in_flight = max_in_flight
        self._on_progress = on_progress
        self._log = structlog.get_logger("gateway.upstream").bind(upstream=self.namespace)
        self._peer: RpcPeer | None = None
        self.state: State = "starting"
        self.protocol_version: str | None = None
        self.capabilities: dict[str, Any] = {}
        self.server_info: dict[str, Any] = {}
        self.last_error: str | None = None
        self.restarts = 0
        self._settled = anyio.Event()
        self._listening = False  # a modern server acknowledged our subscriptions/listen
        self._listen_scope: anyio.CancelScope | None = None
        self._stream: MessageStream | None = None  # the connection's transport, while there is one
        self._connection_tasks: anyio.abc.TaskGroup | None = None  # what lives as long as the connection
        self._ready_again = anyio.Event()  # set each time the connector becomes ready
        self._probe_crashed = anyio.Event()  # the server printed a crash while the probe was pending

    # ---- what the catalog sees ------------------------------------------------------------------

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
    def announces_list_changes(self) -> bool:
        """Whether a change will be announced: a modern server only while our listen stream is up."""
        return self.declares_list_changed and (self._listening or not self.modern)

    @property
    def completes(self) -> bool:
        """Whether completion/complete may be sent (before 2025-03-26 it had no capability flag)."""
        if self.protocol_version is None:
            return False
        if not declares_completions(self.protocol_version):
            return True
        return isinstance(self.capabilities.get("completions"), dict)

    async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """Send a request. Where the server lost our session (it restarted), the connection is made
        afresh and the request tried once more: every method sent upstream only reads."""
        stream = self._stream
        try:
            return await self._request_once(method, params)
        except UpstreamUnavailable:
            if stream is None or not getattr(stream, "session_lost", False):
                raise
            with anyio.move_on_after(self.settings.timeout_s):
                while self._stream is stream or not self.ready:
                    await self._ready_again.wait()
            return await self._request_once(method, params)

    async def _request_once(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        peer = self._peer
        if peer is None or not self.ready:
            raise UpstreamUnavailable(self.namespace, f"is not connected (state: {self.state})")
        try:
            self._slots.acquire_nowait()  # over the bound: refuse now rather than queue without limit
        except anyio.WouldBlock:
            raise UpstreamUnavailable(
                self.namespace, f"is saturated ({self._max_in_flight} requests in flight)"
            ) from None
        try:
            return await peer.request(method, self._for_server(params), timeout=self.settings.timeout_s)
        except UnusableAnswer as exc:
            raise UpstreamProtocolError(
                self.namespace, f"answered {method} with a value that cannot be relayed: {exc.problem}"
            ) from exc
        except RemoteError as exc:
            raise UpstreamRejected(self.namespace, exc.error) from exc
        except PeerClosed as exc:
            raise UpstreamUnavailable(self.namespace, "went away before answering") from exc
        except RequestTimeout as exc:
            message = f"did not answer {method} within {self.settings.timeout_s}s"
            raise UpstreamTimeout(self.namespace, message) from exc
        finally:
            self._slots.release()

    def _for_server(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        if self.modern:
            assert self.protocol_version is not None  # noqa: S101 - modern implies a version
            return with_envelope(params, version=self.protocol_version, client_info=CLIENT_INFO)
        return without_envelope(params)

    async def wait_settled(self) -> None:
        """Until the first connection attempt has either succeeded or failed."""
        await self._settled.wait()

    # ---- supervision ---------------------------------------------------------------------------

    def _enter(self, state: State, **details: Any) -> None:
        if state == self.state:
            return
        if state not in _TRANSITIONS[self.state]:
            raise RuntimeError(f"upstream state {self.state} -> {state} is not a transition")
        was_ready = self.state == "ready"
        self.state = state
        self._log.info("upstream_state", state=state, **details)
        if state != "starting":
            self._settled.set()
        if state == "ready":
            self._ready_again.set()
            self._ready_again = anyio.Event()
        if was_ready or state == "ready":
            self._on_change(self.namespace)

    async def run(self) -> None:
        """Connect, serve, and reconnect with backoff until cancelled or given up."""
        try:
            while True:
                self._ready_since = None
                try:
                    reason = await self._connect_and_serve()
                except HandshakeFailed as exc:
                    self.last_error = str(exc)
                    self._enter("failed", error=self.last_error)
                    return
                except DiedOnProbe as exc:
                    self.last_error = exc.message
                    self._log.warning("upstream_died_on_probe", error=exc.message)
                    self.restarts += 1
                    continue  # once, at once: the handshake alone from now on
                except _connection_failures() as exc:
                    reason = self._reason_of(exc)
                self.last_error = reason
                up_for = None if self._ready_since is None else anyio.current_time() - self._ready_since
                if up_for is not None and up_for >= self._stable_after_s:
                    self._backoff.reset()  # it had proved itself: a drop after that is a new story
                delay = self._backoff.next_delay()
                if delay is None:
                    self._enter("failed", error=reason)
                    return
                if isinstance(self.settings, HttpUpstream):  # a reconnection costs no process start
                    delay = min(delay, REMOTE_RETRY_MAX_S)
                self._enter("backing-off", error=reason, retry_in_s=round(delay, 2))
                await anyio.sleep(delay)
                self.restarts += 1
                self._enter("starting")
        finally:
            self._peer = None
            if self.state != "stopped":
                self._enter("stopped")

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[tuple[MessageStream, dict[str, Any]]]:
        """The upstream's frame stream, whatever its transport, with details worth logging."""
        settings, limit = self.settings, self._max_message_bytes
        if isinstance(settings, StdioUpstream):
            spec = ChildSpec(settings.command, settings.args, {**_env_file(settings), **settings.env}, settings.cwd)
            async with open_child(spec, on_stderr_line=self._log_stderr, max_message_bytes=limit) as (stream, process):
                yield stream, {"pid": process.pid}
        elif settings.transport == "streamable-http":
            from gateway.transports.http_client import open_streamable_http

            async with open_streamable_http(
                settings.url, _http_options(settings), max_message_bytes=limit, token=self._upstream_token
            ) as http_stream:
                yield http_stream, {"url": _without_credentials(settings.url)}
        else:
            from gateway.transports.http_client import open_legacy_sse

            async with open_legacy_sse(
                settings.url, _http_options(settings), max_message_bytes=limit, token=self._upstream_token
            ) as sse_stream:
                yield sse_stream, {"url": _without_credentials(settings.url)}

    async def _connect_and_serve(self) -> str:
        """One connection's life, and why it ended. A failure is re-raised only after the task groups have
        closed, so the supervisor sees the typed error rather than an ExceptionGroup."""
        failure: HandshakeFailed | UpstreamError | None = None
        self._probe_crashed = anyio.Event()
        self._drop_reason: str | None = None
        async with self._open() as (stream, details):
            self._stream = stream
            peer = RpcPeer(
                stream,
                on_request=self._on_server_request,
                on_notification=self._on_server_notification,
                logger=self._log,
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(peer.run)
                self._peer = peer
                self._connection_tasks = tg
                try:
                    await self._establish(peer, stream)
                    self._enter(
                        "ready", server=self.server_info.get("name"), protocol_version=self.protocol_version, **details
                    )
                    self._ready_since = anyio.current_time()
                    self._acknowledged = False
                    if self.modern and self.declares_list_changed:
                        tg.start_soon(self._listen, peer)
                    if isinstance(self.settings, HttpUpstream):
                        tg.start_soon(self._check_health, peer, stream)
                    await peer.wait_closed()
                except (HandshakeFailed, UpstreamError) as exc:
                    failure = exc
                finally:
                    self._peer = None
                    self._listening = False
                    tg.cancel_scope.cancel()
            self._stream = None
        if failure is not None:
            raise failure
        return self._drop_reason or _closed_reason(stream) or "connection closed"

    async def _check_health(self, peer: RpcPeer, stream: MessageStream) -> None:
        """A remote server can go away without a word (no process to watch, a GET stream it may not
        offer): asked every ``HEALTH_CHECK_S`` whether it is there (``ping``; ``server/discover`` for a
        2026-07-28 server, which has no ping). No answer in time, or no server: the connection is
        dropped, the upstream reported down and reconnected with backoff."""
        method = "server/discover" if self.modern else "ping"
        while not peer.closed:
            await anyio.sleep(HEALTH_CHECK_S)
            try:
                await peer.request(method, self._for_server(None), timeout=min(self.settings.timeout_s, HEALTH_CHECK_S))
            except RemoteError:
                continue  # it answered: it is there
            except (RequestTimeout, UnusableAnswer):
                self._drop_reason = f"did not answer {method} within {min(self.settings.timeout_s, HEALTH_CHECK_S)}s"
                self._log.warning("upstream_unresponsive", method=method)
                await peer.aclose()
                return
            except PeerClosed:
                return

    async def _establish(self, peer: RpcPeer, stream: MessageStream) -> None:
        """Speak the server's era: 2026-07-28 when it answers discovery, else the handshake. In ``auto``
        the probe gets ``PROBE_PATIENCE_S`` alone; then the handshake is tried beside it, and a probe
        answer that still comes (a busy server, or one that refuses ``initialize`` as modern-only) wins."""
        settings = self.settings
        mode = "legacy" if isinstance(settings, HttpUpstream) and settings.transport == "sse" else settings.protocol
        if mode == "legacy" or self._handshake_only:
            await self._handshake(peer, probed=False)
            _set_version(stream, self.protocol_version)
            return
        _set_version(stream, LATEST_MODERN_VERSION)
        if mode == "modern":
            self._use_discovered(await self._discover(peer, required=True))
            return
        probe = _Probe()
        failure: HandshakeFailed | UpstreamError | None = None
        discovered: DiscoverResult | None = None
        async with anyio.create_task_group() as tg:  # nothing raised inside: a task group would wrap it
            tg.start_soon(probe.run, lambda: self._discover(peer, required=False))
            try:
                discovered = await self._probe_or_handshake(peer, stream, probe)
            except (HandshakeFailed, UpstreamError) as exc:
                failure = exc
            finally:
                tg.cancel_scope.cancel()  # settled one way or the other: the probe's answer no longer matters
        if failure is not None:
            raise failure
        if discovered is not None:
            self._use_discovered(discovered)
        else:
            _set_version(stream, self.protocol_version)

    async def _probe_or_handshake(self, peer: RpcPeer, stream: MessageStream, probe: _Probe) -> DiscoverResult | None:
        """The DiscoverResult of a modern server, or None once the handshake is done. A server that prints
        a crash on stderr while the probe is pending (mcp <= 1.8.1, which then waits for another line
        before it exits) is restarted for the handshake only at once, not after the probe's patience."""
        pinged = anyio.Event()
        if isinstance(self.settings, StdioUpstream) and self._connection_tasks is not None:
            self._connection_tasks.start_soon(self._ping_beside_probe, peer, pinged)  # left to end by itself
        with anyio.move_on_after(min(PROBE_PATIENCE_S, self.settings.timeout_s)):
            await _first_of(probe.settled, self._probe_crashed, pinged)
        if self._probe_crashed.is_set() and not probe.settled.is_set():
            self._handshake_only = self._guessed_handshake_only = True
            message = (
                self._exited("on the server/discover probe", verb="crashed") + "; restarting it for the handshake only"
            )
            raise DiedOnProbe(self.namespace, message)
        if probe.settled.is_set():
            discovered = probe.result()
            if discovered is not None:
                return discovered
        _set_version(stream, None)
        try:
            await self._handshake(peer, probed=True)
        except _ModernOnly:
            await probe.settled.wait()  # the probe has the rest of timeout_s
            discovered = probe.result()
            if discovered is None:  # it said it is modern: a server too busy starting to answer in time
                _set_version(stream, LATEST_MODERN_VERSION)
                discovered = await self._discover(peer, required=True)  # asked again, on the same connection
            return discovered
        return None

    async def _ping_beside_probe(self, peer: RpcPeer, pinged: anyio.Event) -> None:
        """A ``ping`` right behind the probe: a handshake-era server that ignores the probe but answers it
        is known at once (no patience waited out), and a server that crashed on the probe but reads on
        (mcp <= 1.8.1 exits at its next line) exits now, not at the handshake ten seconds later."""
        with suppress(RemoteError, RequestTimeout, UnusableAnswer, PeerClosed):
            await peer.request("ping", None, timeout=self.settings.timeout_s)
            pinged.set()

    def _use_discovered(self, discovered: DiscoverResult | None) -> None:
        if discovered is None:  # only for a required probe, which raises instead
            raise HandshakeFailed("did not answer server/discover")
        self.protocol_version = LATEST_MODERN_VERSION
        self.capabilities = discovered.capabilities
        meta = discovered.model_extra.get("_meta") if discovered.model_extra else None
        info = meta.get(SERVER_INFO_KEY) if isinstance(meta, dict) else None
        self.server_info = info if isinstance(info, dict) else {}
        if not isinstance(self.capabilities.get("prompts"), dict):
            raise HandshakeFailed("does not offer the prompts capability")

    async def _discover(self, peer: RpcPeer, *, required: bool) -> DiscoverResult | None:
        """The server's DiscoverResult when it speaks a modern revision we speak; None for a legacy server
        (any error that is not a modern one, or silence), unless ``required``."""
        params = with_envelope(None, version=LATEST_MODERN_VERSION, client_info=CLIENT_INFO)
        try:
            raw = await peer.request("server/discover", params, timeout=self.settings.timeout_s)
        except UnusableAnswer as exc:
            raise UpstreamProtocolError(self.namespace, f"answered server/discover unusably: {exc.problem}") from exc
        except RemoteError as exc:
            code, data = exc.error.get("code"), exc.error.get("data")
            supported = data.get("supported") if isinstance(data, dict) else None
            if code == UNSUPPORTED_PROTOCOL_VERSION and isinstance(supported, list):
                if not required and any(v in HANDSHAKE_VERSIONS for v in supported):
                    return None  # it also speaks a handshake revision
                raise HandshakeFailed(f"speaks only protocol revisions {supported}, none of which we speak") from exc
            if required or code in RECOGNIZED_MODERN_ERRORS:
                raise HandshakeFailed(f"refused server/discover: {exc.error.get('message')}") from exc
            return None
        except PeerClosed as exc:
            self._raise_if_unreachable(exc)
            if required:
                raise UpstreamUnavailable(self.namespace, self._exited("during discovery")) from exc
            self._handshake_only = True
            raise DiedOnProbe(
                self.namespace, self._exited("on the server/discover probe") + "; restarting it for the handshake only"
            ) from exc
        except RequestTimeout as exc:
            if required:
                raise UpstreamTimeout(self.namespace, "did not answer server/discover") from exc
            return None
        try:
            result = DiscoverResult.model_validate(raw)
        except ValidationError as exc:
            raise HandshakeFailed(f"sent an invalid server/discover result: {describe(exc)}") from exc
        if LATEST_MODERN_VERSION in result.supportedVersions:
            return result
        if required:
            raise HandshakeFailed(f"supports only {result.supportedVersions}, not {LATEST_MODERN_VERSION}")
        return None  # it answers discovery but advertises no modern revision: a legacy advertisement

    async def _listen(self, peer: RpcPeer) -> None:
        """Hold a ``subscriptions/listen`` stream open for prompt list changes, re-opening it when the server
        ends it; while it is down, the catalog does not cache this server's pages without a TTL."""
        retry = Backoff(initial_s=1.0, max_s=30.0)
        params = {"notifications": {"promptsListChanged": True}}
        while not peer.closed:
            try:
                with anyio.CancelScope() as self._listen_scope:
                    await peer.request("subscriptions/listen", self._for_server(params), timeout=None)
                self._log.info("upstream_listen_ended")
            except RemoteError as exc:
                self._log.warning("upstream_listen_refused", error=exc.error.get("message"))
            except PeerClosed:
                return
            finally:
                self._listen_scope = None
                if self._listening:  # it was up: a later drop is a new one, not one more failed attempt
                    self._listening = False
                    retry.reset()
                    self._on_change(self.namespace)  # changes may now go unannounced: stop caching
            await anyio.sleep(retry.next_delay() or retry.max_s)

    async def _handshake(self, peer: RpcPeer, *, probed: bool) -> None:
        """``probed``: the probe went first on this connection, and a server that dies now died of it."""
        params = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": ADVERTISED_TO_UPSTREAMS,
            "clientInfo": CLIENT_INFO,
        }
        try:
            raw = await peer.request("initialize", params, timeout=self.settings.timeout_s)
        except UnusableAnswer as exc:
            raise UpstreamProtocolError(self.namespace, f"answered initialize unusably: {exc.problem}") from exc
        except RemoteError as exc:
            if exc.error.get("code") == UNSUPPORTED_PROTOCOL_VERSION and probed:
                raise _ModernOnly(exc.error) from exc  # modern after all: the probe's answer decides
            if exc.error.get("code") == UNSUPPORTED_PROTOCOL_VERSION and self._guessed_handshake_only:
                self._handshake_only = self._guessed_handshake_only = False  # its stderr misled us: probe again
                raise UpstreamUnavailable(self.namespace, "is modern after all: probing it again") from exc
            raise HandshakeFailed(f"refused initialize: {exc.error.get('message')}") from exc
        except PeerClosed as exc:
            self._raise_if_unreachable(exc)
            if probed and not self._handshake_only:
                self._handshake_only = True
                message = self._exited("during initialize, after the server/discover probe")
                raise DiedOnProbe(self.namespace, message + "; restarting it for the handshake only") from exc
            raise UpstreamUnavailable(self.namespace, self._exited("during initialize")) from exc
        except RequestTimeout as exc:
            raise UpstreamTimeout(self.namespace, "did not answer initialize") from exc
        try:
            result = InitializeResult.model_validate(raw)
        except ValidationError as exc:
            raise HandshakeFailed(f"sent an invalid initialize result: {describe(exc)}") from exc
        if result.protocolVersion not in HANDSHAKE_VERSIONS:
            raise HandshakeFailed(f"answered with unsupported protocol revision {result.protocolVersion!r}")
        if not isinstance(result.capabilities.get("prompts"), dict):
            raise HandshakeFailed("does not offer the prompts capability")
        self.protocol_version = result.protocolVersion
        self.capabilities = result.capabilities
        self.server_info = result.serverInfo or {}
        try:
            await peer.notify("notifications/initialized")
        except PeerClosed as exc:
            raise UpstreamUnavailable(self.namespace, "exited during initialize") from exc

    async def _on_server_request(self, request: Request, notify: Notify) -> dict[str, Any]:
        if request.method == "ping":
            return {}
        if request.method in RELAYED and self._on_client_request is not None:
            return await self._on_client_request(self.namespace, request.method, request.params)
        raise MethodNotFound(f"Method not found: {request.method}")

    async def _on_server_notification(self, notification: Notification) -> None:
        if notification.method == "notifications/prompts/list_changed":
            self._log.debug("upstream_list_changed")
            self._on_change(self.namespace)
        elif notification.method == "notifications/subscriptions/acknowledged":
            honoured = (notification.params or {}).get("notifications")
            self._listening = isinstance(honoured, dict) and honoured.get("promptsListChanged") is True
            # anything cached before the stream was up may be stale; the first stream of a connection
            # follows its readiness, which was announced already (a second announcement is only noise)
            (self._on_change if self._acknowledged else self._on_stale)(self.namespace)
            self._acknowledged = True
        elif notification.method == "notifications/cancelled" and self._listen_scope is not None:
            self._listen_scope.cancel()  # on stdio a server ends a listen stream this way, and only a listen
        elif notification.method == "notifications/progress" and self._on_progress is not None:
            await self._on_progress(self.namespace, notification.params or {})
        elif notification.method == "notifications/message":
            params = notification.params or {}
            self._log.info("upstream_log", level=params.get("level"), data=params.get("data"))

    def _reason_of(self, exc: BaseException) -> str:
        """A connection's failure as the log and ``check`` say it: naming this upstream."""
        if isinstance(exc, UpstreamError):
            return str(exc)
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if isinstance(self.settings, HttpUpstream):
            return UpstreamUnavailable(self.namespace, f"cannot be reached: {detail}").message
        return UpstreamUnavailable(self.namespace, detail).message

    def _raise_if_unreachable(self, exc: PeerClosed) -> None:
        """A remote server that could not be reached (the transport said why) is down, not dead of the
        probe: reconnected with backoff."""
        reason = _closed_reason(self._stream)
        if reason is not None:
            raise UpstreamUnavailable(self.namespace, reason) from exc

    def _log_stderr(self, line: str) -> None:
        if line:
            self._stderr_tail.append(line)
            self._log.info("upstream_stderr", line=line)
            if self.state == "starting" and _CRASH.search(line):
                self._probe_crashed.set()

    def _exited(self, phase: str, *, verb: str = "exited") -> str:
        """'exited <phase>', with the last lines the server wrote to stderr: usually the reason."""
        tail = " | ".join(self._stderr_tail)
        return f"{verb} {phase}" + (f"; its stderr ended with: {tail[-500:]}" if tail else "")
