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

import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import structlog

from gateway.config import HttpUpstream, StdioUpstream
from gateway.observability.tracing import ClientSpan, tracing
from gateway.protocol.errors import (
    MethodNotFound,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from gateway.protocol.jsonrpc import Notification, Request
from gateway.protocol.modern import with_envelope, without_envelope
from gateway.protocol.versions import (
    declares_completions,
    is_modern,
)
from gateway.rpc import Notify, PeerClosed, RemoteError, RequestTimeout, RpcPeer, UnusableAnswer
from gateway.sources import era_memory
from gateway.sources.backoff import Backoff
from gateway.sources.client_requests import RELAYED
from gateway.sources.eras import (
    DiedOnProbe,
    EraNegotiation,
    HandshakeFailed,
)
from gateway.sources.upkeep import ConnectionUpkeep
from gateway.sources.upstream_options import (
    CLIENT_INFO,
    _env_file,
    _http_options,
    _upstream_token,
    _without_credentials,
    destination_of,
    http_status,
)
from gateway.transports.base import MessageStream
from gateway.transports.stdio import ChildSpec, open_child

if sys.version_info < (3, 11):  # pragma: no cover - exercised on 3.10 only
    from exceptiongroup import BaseExceptionGroup

State = Literal["starting", "ready", "backing-off", "failed", "stopped"]

_TRANSITIONS: dict[State, frozenset[State]] = {
    "starting": frozenset({"ready", "backing-off", "failed", "stopped"}),
    "ready": frozenset({"backing-off", "failed", "stopped"}),
    "backing-off": frozenset({"starting", "stopped"}),
    "failed": frozenset({"stopped"}),
    "stopped": frozenset(),
}


STDERR_TAIL_LINES = 5
REMOTE_RETRY_MAX_S = 5.0
"""A remote upstream that is down is tried again at least this often, whatever ``restart_max_s`` says:
back within seconds of the server listening again."""


def _closed_reason(stream: MessageStream | None) -> str | None:
    reason = getattr(stream, "closed_reason", None)
    return reason if isinstance(reason, str) else None


def _connection_failures() -> tuple[type[BaseException], ...]:
    """What ends a connection (and is retried): OS and upstream errors, and the HTTP client's when it is
    loaded. The HTTP modules (aiohttp, its TLS context) load only with the first HTTP upstream, so a
    gateway of stdio upstreams starts without them."""
    http = sys.modules.get("gateway.transports.http_client")
    if http is None:
        return (OSError, UpstreamError)
    return (OSError, UpstreamError, http.HttpTransportError, *http.HTTP_ERRORS)


def _leaf(exc: BaseException) -> BaseException:
    """The one exception a task group's ExceptionGroup wraps (the group itself when it holds several)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class UpstreamConnector(EraNegotiation, ConnectionUpkeep):
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
        self._destination = destination_of(settings)
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
        self._era_key: str | None = None  # a stdio server's key in what earlier runs learnt (era_memory.py)
        if isinstance(settings, StdioUpstream) and settings.protocol == "auto":
            self._era_key = era_memory.key_of(settings.command, settings.args, settings.cwd)
            if era_memory.handshake_only(self._era_key):  # it died of the probe in an earlier run
                self._handshake_only = self._guessed_handshake_only = True
        self._stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._slots = anyio.Semaphore(max_in_flight)
        self._max_in_flight = max_in_flight
        self._on_progress = on_progress
        self._log = structlog.get_logger("gateway.upstream").bind(upstream=self.namespace)
        self._peer: RpcPeer | None = None
        self.state: State = "starting"
        self.protocol_version: str | None = None
        self.probe_outcome: str | None = None  # why an auto upstream was taken for handshake-era (the log)
        self.capabilities: dict[str, Any] = {}
        self.server_info: dict[str, Any] = {}
        self.last_error: str | None = None
        self.restarts = 0
        self.recent_ms: deque[float] = deque(maxlen=100)  # the last requests' durations (the operator page)
        self._settled = anyio.Event()
        self._listening = False  # a modern server acknowledged our subscriptions/listen
        self._listen_scope: anyio.CancelScope | None = None
        self._stream: MessageStream | None = None  # the connection's transport, while there is one
        self._connection_tasks: anyio.abc.TaskGroup | None = None  # what lives as long as the connection
        self._ready_again = anyio.Event()  # set each time the connector becomes ready

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
        peer, stream = self._peer, self._stream
        if peer is None or not self.ready:
            raise UpstreamUnavailable(self.namespace, f"is not connected (state: {self.state})")
        try:
            self._slots.acquire_nowait()  # over the bound: refuse now rather than queue without limit
        except anyio.WouldBlock:
            raise UpstreamUnavailable(
                self.namespace, f"is saturated ({self._max_in_flight} requests in flight)"
            ) from None
        started = time.perf_counter()
        try:
            with tracing().client(method, params, to=self._destination, mcp_version=self.protocol_version) as span:
                return await self._exchange(peer, stream, method, span.inject(self._for_server(params)), span)
        finally:
            self._slots.release()
            self.recent_ms.append((time.perf_counter() - started) * 1000)

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
            reason = _closed_reason(stream)
            raise UpstreamUnavailable(self.namespace, reason or "went away before answering") from exc
        except RequestTimeout as exc:
            message = f"did not answer {method} within {self.settings.timeout_s}s"
            raise UpstreamTimeout(self.namespace, message) from exc

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
                remembered = self._handshake_only  # what a failure may show the memory was wrong about
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
                    if self._era_key is not None:
                        era_memory.remember_handshake_only(self._era_key)  # the next run skips the probe
                    continue  # once, at once: the handshake alone from now on
                except Exception as exc:  # the supervision boundary: one upstream's fault stays its own
                    failure = _leaf(exc)
                    if isinstance(failure, _connection_failures()):
                        reason = self._reason_of(failure)
                        if self._era_key is not None and remembered and not self._handshake_only:
                            era_memory.forget(self._era_key)  # remembered as handshake-only, it proved modern
                    else:
                        reason = self._unexpected(exc)
                self._stream = None  # a connection that raised left it set
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
            from gateway.transports.legacy_sse_client import open_legacy_sse

            async with open_legacy_sse(
                settings.url, _http_options(settings), max_message_bytes=limit, token=self._upstream_token
            ) as sse_stream:
                yield sse_stream, {"url": _without_credentials(settings.url)}

    async def _connect_and_serve(self) -> str:
        """One connection's life, and why it ended. A failure is re-raised only after the task groups have
        closed, so the supervisor sees the typed error rather than an ExceptionGroup."""
        failure: HandshakeFailed | UpstreamError | None = None
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
                    if self.probe_outcome is not None:
                        details["probe"] = self.probe_outcome
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

    def _unexpected(self, exc: Exception) -> str:
        """An exception nothing expected (a fault in the gateway or a library, a setting the OS refuses):
        logged with its traceback, and the connection treated as failed, so that it costs this upstream
        alone, never the gateway."""
        failure = _leaf(exc)
        detail = f"{type(failure).__name__}: {failure}" if str(failure) else type(failure).__name__
        reason = UpstreamUnavailable(
            self.namespace, f"failed unexpectedly ({detail}); the log has the traceback"
        ).message
        if reason != self.last_error:  # the same fault at each retry: its traceback once
            self._log.error("upstream_unexpected_error", error=reason, exc_info=exc)
        return reason

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

    def _exited(self, phase: str, *, verb: str = "exited") -> str:
        """'exited <phase>', with the last lines the server wrote to stderr: usually the reason."""
        tail = " | ".join(self._stderr_tail)
        return f"{verb} {phase}" + (f"; its stderr ended with: {tail[-500:]}" if tail else "")
