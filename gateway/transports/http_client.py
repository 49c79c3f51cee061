"""HTTP upstream transports as frame streams: MCP Streamable HTTP and the legacy HTTP+SSE transport.

Both look like stdio to the layer above (``send`` a frame, ``receive`` frames), so one RpcPeer and one
supervisor serve every kind of upstream. Streamable HTTP: each frame is a POST; the answer arrives as a JSON
body or an SSE stream. Up to 2025-11-25 the session id and protocol-version headers are kept, a stream the
server closes early is resumed with ``Last-Event-ID``, and a GET stream carries the server's own messages. A
session the server no longer knows (404, or a 400 that names the session, as server-everything answers after a
restart) ends the stream marked ``session_lost`` (the supervisor re-initializes and the request is tried once
more); a server that cannot be reached at all ends it with the reason (the supervisor reconnects with
backoff), instead of failing request after request. From 2026-07-28 there is no session and no GET stream:
every POST carries the headers that mirror its body (``Mcp-Method``, ``Mcp-Name``), and a
``notifications/cancelled`` is not sent but carried out, by closing the cancelled request's response stream.

These transports read a frame's JSON-RPC envelope (id, method, the name a header mirrors) to route it and to answer
an HTTP failure with an error for the request that caused it, but nothing else: they know nothing about prompts.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import aiohttp
import anyio
import httpx
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from httpx_sse import EventSource
from yarl import URL

from gateway.protocol.jsonrpc import id_at_edges
from gateway.protocol.modern import request_headers
from gateway.protocol.trace_context import carried
from gateway.protocol.versions import is_modern
from gateway.transports.base import DEFAULT_MAX_MESSAGE_BYTES, EDGE_BYTES, HTTP_STATUS_DATA_KEY
from gateway.transports.client_credentials import TokenUnavailable, UpstreamToken
from gateway.transports.http_options import HTTP_ERRORS, HttpOptions, describe, upstream_session
from gateway.transports.sse_bodies import events_of

log = structlog.get_logger("gateway.transports.http")

_ACCEPT_BOTH = "application/json, text/event-stream"
_JSON = {"Content-Type": "application/json"}
_SSE_GET = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
_MAX_RESUMES = 5


class HttpTransportError(Exception):
    """The HTTP conversation failed in a way that ends the connection (bad endpoint, lost session)."""


class _TooLarge(Exception):
    """An answer over the message size limit: the request fails, the connection is dropped."""


def _request_id(frame: bytes) -> Any:
    return _peek(frame)[0]


def _peek(frame: bytes) -> tuple[Any, str | None, dict[str, Any] | None]:
    """A message's request id (None for a notification), method and params."""
    try:
        message = json.loads(frame)
    except (ValueError, RecursionError):  # (nested past the standard library's depth: decode refuses it later)
        return None, None, None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None, None, None
    params = message.get("params")
    return message.get("id"), message["method"], params if isinstance(params, dict) else None


def _rpc_error_for(body: bytes, request_id: Any) -> bytes | None:
    """The body when it is a JSON-RPC error answering ``request_id`` (a modern server explains its 4xx)."""
    with suppress(ValueError, RecursionError):
        message = json.loads(body)
        if isinstance(message, dict) and message.get("id") == request_id and isinstance(message.get("error"), dict):
            return body
    return None


def _status_problem(response: aiohttp.ClientResponse) -> str:
    return f"answered HTTP {response.status}"


UNAVAILABLE_STATUSES = frozenset({502, 503, 504})
"""What a server (or the proxy before it) answers while it is not there: the connection is given up."""


def _too_large(limit: int) -> str:
    return f"the answer is over the message size limit ({limit} bytes)"


def _error_frame(request_id: Any, message: str, status: int | None = None) -> bytes:
    error: dict[str, Any] = {"code": -32603, "message": message}
    if status is not None:
        error["data"] = {HTTP_STATUS_DATA_KEY: status}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


def _frames_of(data: bytes) -> list[bytes]:
    """A JSON body may hold one message or a batch; hand them up one by one."""
    stripped = data.strip()
    if stripped.startswith(b"["):
        with suppress(ValueError, RecursionError):
            return [json.dumps(m).encode() for m in json.loads(stripped)]
    return [stripped] if stripped else []


class _HttpStream:
    """What both transports share: each frame sent is its own POST (run concurrently in the stream's task
    group), and frames received wait in a bounded queue. One aiohttp session per upstream carries every
    request: POSTs, SSE streams, the session's end."""

    def __init__(
        self,
        client: aiohttp.ClientSession,
        url: str,
        task_group: TaskGroup,
        max_message_bytes: int,
        token: UpstreamToken | None = None,
    ) -> None:
        self._client = client
        self._token = token
        self._url = URL(url)  # where frames are POSTed; parsed once, not per request
        self._tg = task_group
        self._max = max_message_bytes
        self._in: MemoryObjectSendStream[bytes]
        self._out: MemoryObjectReceiveStream[bytes]
        self._in, self._out = anyio.create_memory_object_stream[bytes](64)
        self.session_lost = False
        self.closed_reason: str | None = None
        """Why the stream ended on its own: the server's session was lost, or it cannot be reached."""

    async def _deliver(self, data: bytes) -> None:
        for frame in _frames_of(data):
            if len(frame) > self._max:  # (an SSE event's: a JSON body is bounded as it is read)
                log.warning("upstream_message_too_large", size=len(frame), limit=self._max)
                found = id_at_edges(frame[:EDGE_BYTES], frame[-EDGE_BYTES:])
                if found is None or found[1] != "response":  # (a request of the server's has an id of its own)
                    continue
                frame = _error_frame(found[0], f"HTTP request failed: {_too_large(self._max)}")
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._in.send(frame)

    async def send(self, frame: bytes) -> None:
        self._tg.start_soon(self._post, frame)

    async def _authorized(self, headers: dict[str, str]) -> dict[str, str]:
        return await _with_token(self._token, headers)

    async def _post_frame(self, frame: bytes, headers: dict[str, str]) -> aiohttp.ClientResponse:
        """POST a frame; the response once its head has arrived. A pooled connection the server (or a
        proxy) closed just as it was taken fails before anything was answered ("server disconnected",
        or the body could not be written): that one is tried once more, on a fresh connection (aiohttp
        retries only idempotent methods by itself). A 401 to the
        gateway's own token is tried once more with a fresh token."""
        if self._token is not None:
            headers = await self._authorized(headers)
        try:
            response = await self._client.post(self._url, data=frame, headers=headers)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):  # closed under us: nothing was answered
            response = await self._client.post(self._url, data=frame, headers=headers)
        if response.status == 401 and self._token is not None:
            response.release()
            self._token.rejected(headers["Authorization"])
            headers = await self._authorized(headers)
            response = await self._client.post(self._url, data=frame, headers=headers)
        return response

    async def _post(self, frame: bytes) -> None:
        raise NotImplementedError

    def _end(self, reason: str | None = None) -> None:
        if reason is not None and self.closed_reason is None:
            self.closed_reason = reason
        self._in.close()

    def _unreachable(self, exc: BaseException) -> bool:
        """Whether a failed request means the server cannot be reached (ends the stream), rather than
        that this one request failed (time-outs are the request's: the RPC layer bounds them)."""
        if isinstance(exc, aiohttp.ClientConnectorError):  # no connection at all (a dropped one was retried)
            self._end(f"cannot be reached: {describe(exc)}")
            return True
        return False

    async def receive(self) -> bytes:
        try:
            return await self._out.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        self._in.close()
        self._out.close()


class StreamableHttpStream(_HttpStream):
    session_id: str | None = None  # per instance once set; immutable defaults, so no __init__ of its own
    protocol_version: str | None = None
    _listening = False
    hears_server = False  # a 2025 server's own messages (list_changed) can reach us: its GET stream is open

    def set_protocol_version(self, version: str | None) -> None:
        self.protocol_version = version

    @property
    def modern(self) -> bool:
        return is_modern(self.protocol_version)

    def _headers(self, accept: str) -> dict[str, str]:
        headers = {"Accept": accept}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    async def _post(self, frame: bytes) -> None:
        """Notifications and answers (requests are exchanged: ``exchange``)."""
        request_id, method, params = _peek(frame)
        if self.modern and method == "notifications/cancelled":
            return  # not sent but carried out: the cancelled exchange's caller closes its connection
        answer = await self._exchange(frame, request_id, self._request_headers(method, params))
        if answer is not None:
            await self._deliver(answer)

    async def exchange(self, frame: bytes, request_id: Any, method: str, params: dict[str, Any] | None) -> bytes | None:
        """Send a request and return its answer when it comes as the POST's JSON body (the usual case):
        no task, no queue between the caller and its answer. None when the answer was delivered to
        ``receive`` instead (an SSE answer, with the messages before it). Cancelling the caller closes
        the request's connection, which is how a 2026-07-28 request is cancelled."""
        answer = await self._exchange(frame, request_id, self._request_headers(method, params))
        if answer is not None and answer.lstrip().startswith(b"["):  # a batch: its messages one by one
            await self._deliver(answer)
            return None
        return answer

    def _request_headers(self, method: str | None, params: dict[str, Any] | None) -> dict[str, str]:
        """A request's headers; the trace context its ``_meta`` carries goes as HTTP headers too, for
        what traces the HTTP layer in front of the server (the server's MCP span takes ``_meta``'s)."""
        if not self.modern:
            headers = self._headers(_ACCEPT_BOTH)
        else:
            headers = {"Accept": _ACCEPT_BOTH, **request_headers(method or "", params, self.protocol_version or "")}
        headers.update(carried(params))
        return headers

    async def _exchange(self, frame: bytes, request_id: Any, headers: dict[str, str]) -> bytes | None:
        """One POST: the hot path of every upstream request. Returns the answer to hand up (a JSON body,
        or an error standing for a failed request); an SSE answer is relayed as it streams."""
        headers["Content-Type"] = "application/json"
        try:
            async with await self._post_frame(frame, headers) as response:
                status = response.status
                session_id = response.headers.get("mcp-session-id")
                if session_id is not None and self.session_id is None and not self.modern:
                    self.session_id = session_id
                if status == 404 and self.session_id is not None:
                    self._lose_session(status)
                    return None
                if status in UNAVAILABLE_STATUSES:
                    self._end(f"answered HTTP {status}")
                    return None
                if status >= 300:  # a redirect left unfollowed (no Location) too
                    body = await self._read_body(response)
                    if status == 400 and self.session_id is not None and b"session" in body.lower():
                        self._lose_session(status)  # server-everything's answer to an id it never issued
                        return None
                    if request_id is None:
                        return None
                    return _rpc_error_for(body, request_id) or _error_frame(
                        request_id, _status_problem(response), status
                    )
                if status == 202 or request_id is None:
                    return None
                answer: bytes | None = None
                if response.content_type == "text/event-stream":
                    await self._read_stream(events_of(response), request_id)
                else:
                    answer = await self._read_body(response)
        except (*HTTP_ERRORS, _TooLarge, TokenUnavailable) as exc:
            if request_id is None or self._unreachable(exc):
                return None
            return _error_frame(request_id, f"HTTP request failed: {describe(exc)}")
        self._start_listening()
        return answer

    def _lose_session(self, status: int) -> None:
        log.info("upstream_session_lost", status=status)
        self.session_lost = True
        self._end(f"no longer knows our session (HTTP {status})")

    async def _read_body(self, response: aiohttp.ClientResponse) -> bytes:
        body = bytearray()
        async for chunk in response.content.iter_any():
            body += chunk
            if len(body) > self._max:
                raise _TooLarge(_too_large(self._max))
        return bytes(body)

    async def _read_stream(self, source: EventSource, request_id: Any) -> None:
        """Relay a POST's SSE stream; if it ends before our answer, resume it with GET + Last-Event-ID."""
        last_id, retry_ms, answered = await self._relay(source, request_id)
        for _ in range(_MAX_RESUMES):
            if answered or last_id is None or self.modern:  # 2026-07-28 streams are not resumable
                break
            await anyio.sleep((retry_ms or 1000) / 1000)
            headers = {**self._headers("text/event-stream"), "Last-Event-ID": last_id}
            async with self._client.get(self._url, headers=await self._authorized(headers)) as resumed:
                if resumed.status != 200:
                    break
                next_id, retry_ms, answered = await self._relay(events_of(resumed), request_id)
                last_id = next_id or last_id
        if not answered:
            await self._deliver(_error_frame(request_id, "closed its response stream without answering"))

    async def _relay(self, source: EventSource, request_id: Any) -> tuple[str | None, int | None, bool]:
        last_id: str | None = None
        retry_ms: int | None = None
        answered = False
        with suppress(*HTTP_ERRORS, httpx.HTTPError):
            async for event in source.aiter_sse():
                last_id = event.id or last_id
                retry_ms = event.retry or retry_ms
                if event.data and event.event in ("message", ""):
                    data = event.data.encode()
                    answered = answered or _answers(data, request_id)
                    await self._deliver(data)
        return last_id, retry_ms, answered

    def _start_listening(self) -> None:
        if (
            not self._listening
            and self.session_id is not None
            and self.protocol_version is not None
            and not self.modern
        ):
            self._listening = True
            self._tg.start_soon(self._listen)

    async def _listen(self) -> None:
        """The server's own messages (list_changed, pings) on a GET stream, reopened when it drops."""
        last_id: str | None = None
        delay = 1.0
        while True:
            headers = self._headers("text/event-stream")
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                async with self._client.get(self._url, headers=await self._authorized(headers)) as response:
                    status = response.status
                    if status == 405:
                        return  # the server offers no stream: fine, it can still answer requests
                    if status == 404:
                        self._lose_session(status)
                        return
                    if status == 200:
                        delay, self.hears_server = 1.0, True
                        async for event in events_of(response).aiter_sse():
                            last_id = event.id or last_id
                            delay = (event.retry or 1000) / 1000
                            if event.data:
                                await self._deliver(event.data.encode())
            except (*HTTP_ERRORS, httpx.HTTPError) as exc:
                if self._unreachable(exc):
                    return
                log.debug("upstream_stream_dropped", error=describe(exc))
            self.hears_server = False
            await anyio.sleep(delay)
            delay = min(delay * 2, 30.0)

    async def terminate(self) -> None:
        """Tell the server we are done with the session (it may refuse with 405; either is fine)."""
        if self.session_id is not None:
            with suppress(*HTTP_ERRORS), anyio.move_on_after(2):
                headers = await self._authorized(self._headers("application/json"))
                async with self._client.delete(self._url, headers=headers):
                    pass


async def _with_token(token: UpstreamToken | None, headers: dict[str, str]) -> dict[str, str]:
    """``headers`` with the gateway's own token for an upstream, where it needs one."""
    if token is not None:
        headers["Authorization"] = await token.authorization()
    return headers


def _answers(data: bytes, request_id: Any) -> bool:
    with suppress(ValueError, RecursionError):
        message = json.loads(data)
        return isinstance(message, dict) and message.get("id") == request_id and "method" not in message
    return False


@asynccontextmanager
async def open_streamable_http(
    url: str,
    options: HttpOptions,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    token: UpstreamToken | None = None,
) -> AsyncIterator[StreamableHttpStream]:
    async with upstream_session(url, options) as client, anyio.create_task_group() as tg:
        stream = StreamableHttpStream(client, url, tg, max_message_bytes, token)
        try:
            yield stream
        finally:
            with anyio.CancelScope(shield=True):
                await stream.terminate()
            await stream.aclose()
            tg.cancel_scope.cancel()
