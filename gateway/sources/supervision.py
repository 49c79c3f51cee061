"""The supervision of one upstream connector: open its transport, establish its era, serve until the
connection ends, and reconnect with exponential backoff and jitter, until cancelled or given up. The
boundary that keeps one upstream's failure its own is here: whatever a connection raises, expected or
not, ends that connection, is said in the upstream's state and ``check``, and is tried again; it never
leaves ``run()``. Also what the server sends on a connection (pings, list changes, progress, logs,
requests relayed to the client). Mixed into the connector, whose state it reads and sets.
"""

from __future__ import annotations

import signal
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import Process, TaskGroup

from gateway.config import HttpUpstream, StdioUpstream
from gateway.protocol.errors import MethodNotFound, UpstreamError, UpstreamUnavailable
from gateway.protocol.jsonrpc import Notification, Request
from gateway.protocol.lists import EVERY_LIST, PROMPTS, SKILLS, OnChange
from gateway.rpc import Notify, PeerClosed, RpcPeer
from gateway.sources import era_memory
from gateway.sources.backoff import Backoff
from gateway.sources.client_requests import RELAYED
from gateway.sources.eras import DiedOnProbe, HandshakeFailed
from gateway.sources.stderr_log import StderrLog
from gateway.sources.upstream_options import _env_file, _http_options, _without_credentials
from gateway.sources.upstream_states import State, UpstreamStates
from gateway.transports.base import MessageStream
from gateway.transports.stdio import ChildSpec, open_child

if TYPE_CHECKING:
    from gateway.transports.client_credentials import UpstreamToken

STDERR_TAIL_LINES = 5
REMOTE_RETRY_MAX_S = 5.0
"""A remote upstream that is down is tried again at least this often, whatever ``restart_max_s`` says:
back within seconds of the server listening again."""
EXIT_SEEN_S = 0.5
"""How long a stdio child whose output ended is given to be seen exiting by itself (a crash is seen at
once) before its stop: its exit status, so told, says why the connection ended."""


def closed_reason(stream: MessageStream | None) -> str | None:
    """Why a transport ended on its own, where it says (an HTTP server that cannot be reached)."""
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


MASKED_FROM = 6
"""An env value this long or longer is masked in a server's stderr; shorter ones (``1``, ``true``, ``dev``)
are no secret, and masking them would garble every line."""


def _masked(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """What of each env value to mask in a server's stderr, with its name, longest first: the value, and
    each line of one that has several (a PEM key in an env file; stderr is read line by line), stripped
    as the lines are (a reviewer's value with a trailing space and key over lines were not masked)."""
    pieces = {
        piece: name
        for name, value in env.items()
        for piece in (value, value.strip(), *(line.strip() for line in value.splitlines()))
        if len(piece) >= MASKED_FROM
    }
    return sorted(pieces.items(), key=lambda item: -len(item[0]))


class Supervision:
    """The connection's life and its restarts; the connector's attributes it reads and sets."""

    settings: StdioUpstream | HttpUpstream
    namespace: str
    protocol_version: str | None
    server_info: dict[str, Any]
    probe_outcome: str | None
    last_error: str | None
    restarts: int
    _states: UpstreamStates
    _log: Any
    _backoff: Backoff
    _stable_after_s: float
    _ready_since: float | None
    _handshake_only: bool
    _probe_suspected: bool
    _probe_cleared: bool
    _era_key: str | None
    _max_message_bytes: int
    _upstream_token: UpstreamToken | None
    _stderr_tail: deque[str]
    _env_values: list[tuple[str, str]]  # the child's env values to mask in what it writes, longest first
    _child: Process | None  # the served stdio child, while it is (its exit says why its connection ended)
    _child_status: int | None  # its exit status, if it exited before the gateway stopped it
    _output_held: anyio.Event  # its first process exited, its output did not end (transports/stdio.py)
    _stderr_log: StderrLog
    _stream: MessageStream | None
    _peer: RpcPeer | None
    _connection_tasks: TaskGroup | None
    _drop_reason: str | None
    _acknowledged: bool
    _listening: bool
    _listening_skills: bool
    _listen_scope: anyio.CancelScope | None
    _on_change: OnChange
    _on_stale: Callable[[str], None]
    _on_progress: Callable[[str, dict[str, Any]], Awaitable[None]] | None
    _on_client_request: Callable[[object, str, dict[str, Any] | None], Awaitable[dict[str, Any]]] | None

    if TYPE_CHECKING:  # the connector's and the other mixins' (declared only: never in their way at run time)

        @property
        def modern(self) -> bool: ...

        @property
        def declares_list_changed(self) -> bool: ...

        @property
        def declares_resource_changes(self) -> bool: ...

        async def _establish(self, peer: RpcPeer, stream: MessageStream) -> None: ...

        async def _listen(self, peer: RpcPeer) -> None: ...

        async def _check_health(self, peer: RpcPeer) -> None: ...

        async def _check_when_held(self, peer: RpcPeer) -> None: ...

    def _enter(self, state: State, **details: Any) -> None:
        self._states.enter(state, **details)

    async def run(self) -> None:
        """Connect, serve, and reconnect with backoff until cancelled or given up."""
        if self.settings.unresolved is not None:  # a ${VAR} it needs is unset: never started
            self.last_error = f"not started: {self.settings.unresolved}"
            self._enter("failed", error=self.last_error)
            return
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
                    continue  # once, at once: the handshake alone from now on (remembered once it serves)
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
            if self._states.state not in ("stopped", "failed"):  # given up, it says so until shut down
                self._enter("stopped")

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[tuple[MessageStream, dict[str, Any]]]:
        """The upstream's frame stream, whatever its transport, with details worth logging."""
        settings, limit = self.settings, self._max_message_bytes
        if isinstance(settings, StdioUpstream):
            self._stderr_tail.clear()  # what this process says (the last one's lines told of the last one)
            env = {**_env_file(settings), **settings.env}
            self._env_values = _masked(env)
            spec = ChildSpec(settings.command, settings.args, env, settings.cwd)
            self._output_held = held = anyio.Event()
            async with open_child(
                spec, on_stderr_line=self._log_stderr, max_message_bytes=limit, on_output_held=held.set
            ) as (stream, process):
                self._child = process
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
        self._child = self._child_status = None
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
                    self._probe_cleared = False  # served: a death on the probe may be the probe's again
                    if self._probe_suspected:  # it died on the probe, and the handshake alone serves it
                        self._probe_suspected = False
                        if self._era_key is not None and not self.modern:
                            era_memory.remember_handshake_only(self._era_key)  # the next run skips the probe
                    self._acknowledged = False
                    if self.modern and (self.declares_list_changed or self.declares_resource_changes):
                        tg.start_soon(self._listen, peer)
                    if isinstance(self.settings, HttpUpstream):
                        tg.start_soon(self._check_health, peer)
                    else:  # its first process gone and its output held: asked whether it is there
                        tg.start_soon(self._check_when_held, peer)
                    await peer.wait_closed()
                except (HandshakeFailed, UpstreamError) as exc:
                    failure = exc
                finally:
                    self._peer = None
                    self._listening = self._listening_skills = False
                    self._states.connection_lost()  # announced before the process's stop, not after it
                    tg.cancel_scope.cancel()
            self._stream = None
            if self._child is not None:  # did it exit (a crash), or is it stopped next (it closed its output)?
                with anyio.move_on_after(EXIT_SEEN_S):
                    await self._child.wait()
                self._child_status = self._child.returncode
        if failure is not None:
            raise failure
        return self._drop_reason or closed_reason(stream) or self._child_exit() or "connection closed"

    async def _on_server_request(self, request: Request, notify: Notify) -> dict[str, Any]:
        if request.method == "ping":
            return {}
        if request.method in RELAYED and self._on_client_request is not None:
            return await self._on_client_request(self, request.method, request.params)  # (by connection)
        raise MethodNotFound(f"Method not found: {request.method}")

    async def _on_server_notification(self, notification: Notification) -> None:
        if notification.method == "notifications/prompts/list_changed":
            self._log.debug("upstream_list_changed")
            self._on_change(self.namespace, PROMPTS)
        elif notification.method == "notifications/resources/list_changed" and self.settings.relay_skills:
            self._log.debug("upstream_resources_list_changed")  # its skills: asked for afresh, announced
            self._on_change(self.namespace, SKILLS)
        elif notification.method == "notifications/subscriptions/acknowledged":
            honoured = (notification.params or {}).get("notifications")
            honoured = honoured if isinstance(honoured, dict) else {}
            self._listening = honoured.get("promptsListChanged") is True
            self._listening_skills = self.declares_resource_changes and honoured.get("resourcesListChanged") is True
            self._log.info(
                "upstream_listening", prompts_list_changed=self._listening, skills_changed=self._listening_skills
            )
            # anything cached before the stream was up may be stale; the first stream of a connection
            # follows its readiness, which was announced already (a second announcement is only noise)
            if self._acknowledged:
                self._on_change(self.namespace, EVERY_LIST)
            else:
                self._on_stale(self.namespace)
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
        reason = closed_reason(self._stream)
        if reason is not None:
            raise UpstreamUnavailable(self.namespace, reason) from exc

    def _log_stderr(self, line: str) -> None:
        """A line the server wrote to stderr: logged, and kept for its exit's reason (check, the operator
        page), with each of its env values shown as ``${NAME}`` (a tester's server printed its API key,
        and the gateway quoted it; its env values are never to be logged)."""
        if line:
            for value, name in self._env_values:
                if value in line:
                    line = line.replace(value, f"${{{name}}}")
            self._stderr_tail.append(line)
            self._stderr_log.line(line)

    def _child_exit(self) -> str | None:
        """How a served child's connection ended, when the child is gone: its exit and its last stderr
        lines, as for an exit while starting (a tester saw only "connection closed" for a crash)."""
        code = self._child_status
        if code is None:
            return None
        how = f"exited with status {code}"
        if code < 0:
            with suppress(ValueError):
                how = f"was killed by {signal.Signals(-code).name}"
        return f"connection closed: the server {how}{self._stderr_said()}"

    def _exited(self, phase: str, *, verb: str = "exited") -> str:
        """'exited <phase>', with the last lines the server wrote to stderr: usually the reason."""
        return f"{verb} {phase}{self._stderr_said()}"

    def _stderr_said(self) -> str:
        """The last lines the server wrote to stderr, as an exit's reason ends with them ('' if none)."""
        tail = " | ".join(self._stderr_tail)
        return f"; its stderr ended with: {tail[-500:]}" if tail else ""
