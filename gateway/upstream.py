"""An upstream connector: one downstream MCP server, kept connected, behind a narrow seam.

Seam: ``request()``, ``aclose()`` (by leaving ``run()``), and change callbacks. It runs the handshake
(newest revision first, any revision we speak accepted), insists on the ``prompts`` capability, answers
pings, turns ``notifications/prompts/list_changed`` into a change callback, and restarts a crashed
server with exponential backoff and jitter. Requests in flight when the server dies fail at once.

States (the whole machine lives in ``_TRANSITIONS``):
    starting ─► ready ─► backing-off ─► starting ...
        └──────────────► failed (gave up: bad handshake, or too many restarts)
    any ─► stopped (gateway shutting down)
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
import structlog
from pydantic import ValidationError

from gateway import __version__
from gateway.config import HttpUpstream, StdioUpstream
from gateway.errors import (
    MethodNotFound,
    UpstreamError,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from gateway.protocol.jsonrpc import Notification, Request
from gateway.protocol.models import InitializeResult, describe
from gateway.protocol.versions import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE_VERSION, declares_completions
from gateway.rpc import Notify, PeerClosed, RemoteError, RequestTimeout, RpcPeer
from gateway.transports.base import MessageStream
from gateway.transports.http_client import HttpTransportError, open_legacy_sse, open_streamable_http
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

    def set_protocol_version(self, version: str) -> None: ...


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class HandshakeFailed(Exception):
    """The server answered, but not as a prompt server we can use: retrying will not help."""


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


class UpstreamConnector:
    def __init__(
        self,
        settings: StdioUpstream | HttpUpstream,
        *,
        on_change: Callable[[str], None],
        max_message_bytes: int,
        backoff: Backoff | None = None,
        max_in_flight: int = 256,
        on_progress: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self.namespace = settings.namespace
        self._on_change = on_change
        self._max_message_bytes = max_message_bytes
        self._backoff = backoff or Backoff()
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

    # ---- what the catalog sees ------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self.state == "ready" and self._peer is not None and not self._peer.closed

    @property
    def announces_list_changes(self) -> bool:
        prompts = self.capabilities.get("prompts")
        return isinstance(prompts, dict) and prompts.get("listChanged") is True

    @property
    def completes(self) -> bool:
        """Whether completion/complete may be sent (before 2025-03-26 it had no capability flag)."""
        if self.protocol_version is None:
            return False
        if not declares_completions(self.protocol_version):
            return True
        return isinstance(self.capabilities.get("completions"), dict)

    async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
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
            return await peer.request(method, params, timeout=self.settings.timeout_s)
        except RemoteError as exc:
            raise UpstreamRejected(self.namespace, exc.error) from exc
        except PeerClosed as exc:
            raise UpstreamUnavailable(self.namespace, "went away before answering") from exc
        except RequestTimeout as exc:
            message = f"did not answer {method} within {self.settings.timeout_s}s"
            raise UpstreamTimeout(self.namespace, message) from exc
        finally:
            self._slots.release()

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
        if was_ready or state == "ready":
            self._on_change(self.namespace)

    async def run(self) -> None:
        """Connect, serve, and reconnect with backoff until cancelled or given up."""
        try:
            while True:
                try:
                    await self._connect_and_serve()
                    reason = "connection closed"
                except HandshakeFailed as exc:
                    self.last_error = str(exc)
                    self._enter("failed", error=self.last_error)
                    return
                except (OSError, UpstreamError, HttpTransportError, httpx.HTTPError) as exc:
                    reason = str(exc) or type(exc).__name__
                self.last_error = reason
                delay = self._backoff.next_delay()
                if delay is None:
                    self._enter("failed", error=reason)
                    return
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
            spec = ChildSpec(settings.command, settings.args, settings.env, settings.cwd)
            async with open_child(spec, on_stderr_line=self._log_stderr, max_message_bytes=limit) as (stream, process):
                yield stream, {"pid": process.pid}
        elif settings.transport == "streamable-http":
            async with open_streamable_http(
                settings.url, settings.headers, timeout_s=settings.timeout_s, max_message_bytes=limit
            ) as http_stream:
                yield http_stream, {"url": _without_credentials(settings.url)}
        else:
            async with open_legacy_sse(
                settings.url, settings.headers, timeout_s=settings.timeout_s, max_message_bytes=limit
            ) as sse_stream:
                yield sse_stream, {"url": _without_credentials(settings.url)}

    async def _connect_and_serve(self) -> None:
        """One connection's life. A failure is re-raised only after the task groups have closed, so the
        supervisor sees the typed error rather than an ExceptionGroup."""
        failure: HandshakeFailed | UpstreamError | None = None
        async with self._open() as (stream, details):
            peer = RpcPeer(
                stream,
                on_request=self._on_server_request,
                on_notification=self._on_server_notification,
                logger=self._log,
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(peer.run)
                self._peer = peer
                try:
                    await self._handshake(peer)
                    if isinstance(stream, VersionedStream) and self.protocol_version is not None:
                        stream.set_protocol_version(self.protocol_version)
                    self._enter(
                        "ready", server=self.server_info.get("name"), protocol_version=self.protocol_version, **details
                    )
                    self._backoff.reset()
                    await peer.wait_closed()
                except (HandshakeFailed, UpstreamError) as exc:
                    failure = exc
                finally:
                    self._peer = None
                    tg.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def _handshake(self, peer: RpcPeer) -> None:
        params = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcp-prompt-gateway", "version": __version__},
        }
        try:
            raw = await peer.request("initialize", params, timeout=self.settings.timeout_s)
        except RemoteError as exc:
            raise HandshakeFailed(f"refused initialize: {exc.error.get('message')}") from exc
        except PeerClosed as exc:
            raise UpstreamUnavailable(self.namespace, "exited during initialize") from exc
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
        raise MethodNotFound(f"Method not found: {request.method}")

    async def _on_server_notification(self, notification: Notification) -> None:
        if notification.method == "notifications/prompts/list_changed":
            self._log.debug("upstream_list_changed")
            self._on_change(self.namespace)
        elif notification.method == "notifications/progress" and self._on_progress is not None:
            await self._on_progress(notification.params or {})
        elif notification.method == "notifications/message":
            params = notification.params or {}
            self._log.info("upstream_log", level=params.get("level"), data=params.get("data"))

    def _log_stderr(self, line: str) -> None:
        if line:
            self._log.info("upstream_stderr", line=line)
