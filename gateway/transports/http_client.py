"""HTTP upstream transports as frame streams: MCP Streamable HTTP and the legacy HTTP+SSE transport.

Both look like stdio to the layer above (``send`` a frame, ``receive`` frames), so one RpcPeer and one
supervisor serve every kind of upstream. Streamable HTTP: each frame is a POST; the answer arrives as
a JSON body or an SSE stream. Up to 2025-11-25 the session id and protocol-version headers are kept,
a stream the server closes early is resumed with ``Last-Event-ID``, and a GET stream carries the
server's own messages; a 404 on an established session ends the stream (the supervisor
re-initializes). From 2026-07-28 there is no session and no GET stream: every POST carries the
headers that mirror its body (``Mcp-Method``, ``Mcp-Name``), and a ``notifications/cancelled`` is
not sent but carried out, by closing the cancelled request's response stream.

These transports read a frame's JSON-RPC envelope (id, method, the name a header mirrors) to route
it and to answer an HTTP failure with an error for the request that caused it, but nothing else:
they know nothing about prompts.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import httpx
import structlog
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from httpx_sse import EventSource, ServerSentEvent, aconnect_sse

from gateway.protocol.modern import request_headers
from gateway.protocol.versions import is_modern
from gateway.transports.base import DEFAULT_MAX_MESSAGE_BYTES
from gateway.transports.http1 import Http1Error, Http1Pool

log = structlog.get_logger("gateway.transports.http")

_ACCEPT_BOTH = "application/json, text/event-stream"
_MAX_RESUMES = 5


class HttpTransportError(Exception):
    """The HTTP conversation failed in a way that ends the connection (bad endpoint, lost session)."""


def _request_id(frame: bytes) -> Any:
    return _peek(frame)[0]


def _peek(frame: bytes) -> tuple[Any, str | None, dict[str, Any] | None]:
    """A message's request id (None for a notification), method and params."""
    try:
        message = json.loads(frame)
    except ValueError:
        return None, None, None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None, None, None
    params = message.get("params")
    return message.get("id"), message["method"], params if isinstance(params, dict) else None


def _rpc_error_for(body: bytes, request_id: Any) -> bytes | None:
    """The body when it is a JSON-RPC error answering ``request_id`` (a modern server explains its 4xx)."""
    with suppress(ValueError):
        message = json.loads(body)
        if isinstance(message, dict) and message.get("id") == request_id and isinstance(message.get("error"), dict):
            return body
    return None


def _error_frame(request_id: Any, message: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": message}}).encode()


def _frames_of(data: bytes) -> list[bytes]:
    """A JSON body may hold one message or a batch; hand them up one by one."""
    stripped = data.strip()
    if stripped.startswith(b"["):
        with suppress(ValueError):
            return [json.dumps(m).encode() for m in json.loads(stripped)]
    return [stripped] if stripped else []


class _HttpStream:
    """What both transports share: each frame sent is its own POST (run concurrently in the stream's task
    group) on the lean HTTP/1.1 client, and frames received wait in a bounded queue. httpx carries the
    long-lived requests (SSE streams) and the rare ones."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        url: str,
        task_group: TaskGroup,
        max_message_bytes: int,
        *,
        headers: Mapping[str, str],
        timeout_s: float,
    ) -> None:
        self._client = client
        self._url = url  # where frames are POSTed
        parts = urlsplit(url)
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        raw_headers = [(name.encode(), value.encode()) for name, value in headers.items()]
        self._posts = Http1Pool(url, headers=raw_headers, connect_timeout_s=timeout_s)
        self._tg = task_group
        self._max = max_message_bytes
        self._in: MemoryObjectSendStream[bytes]
        self._out: MemoryObjectReceiveStream[bytes]
        self._in, self._out = anyio.create_memory_object_stream[bytes](64)

    async def _deliver(self, data: bytes) -> None:
        for frame in _frames_of(data):
            if len(frame) > self._max:
                log.warning("upstream_message_too_large", size=len(frame), limit=self._max)
                continue
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._in.send(frame)

    async def send(self, frame: bytes) -> None:
        self._tg.start_soon(self._post, frame)

    async def _post(self, frame: bytes) -> None:
        raise NotImplementedError

    def _end(self) -> None:
        self._in.close()

    async def receive(self) -> bytes:
        try:
            return await self._out.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        self._in.close()
        self._out.close()
        await self._posts.aclose()


class StreamableHttpStream(_HttpStream):
    session_id: str | None = None  # per instance once set; immutable defaults, so no __init__ of its own
    protocol_version: str | None = None
    _listening = False

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
        if not self.modern:
            return self._headers(_ACCEPT_BOTH)
        return {"Accept": _ACCEPT_BOTH, **request_headers(method or "", params, self.protocol_version or "")}

    async def _exchange(self, frame: bytes, request_id: Any, headers: dict[str, str]) -> bytes | None:
        """One POST, straight on the connection pool: the hot path of every upstream request. Returns
        the answer to hand up (a JSON body, or an error standing for a failed request); an SSE answer
        is relayed as it streams."""
        raw_headers = [
            *((name.lower().encode(), value.encode()) for name, value in headers.items()),
            (b"content-type", b"application/json"),
        ]
        try:
            async with self._posts.post(self._target, raw_headers, frame) as response:
                status = response.status
                session_id = response.header(b"mcp-session-id")
                if session_id is not None and self.session_id is None and not self.modern:
                    self.session_id = session_id
                if status == 404 and self.session_id is not None:
                    log.info("upstream_session_expired")
                    self._end()
                    return None
                if status >= 400:
                    if request_id is None:
                        return None
                    body = await self._read_body(response.body)
                    return _rpc_error_for(body, request_id) or _error_frame(request_id, f"answered HTTP {status}")
                if status == 202 or request_id is None:
                    return None
                kind = (response.header(b"content-type") or "").split(";")[0].strip().lower()
                answer: bytes | None = None
                if kind == "text/event-stream":
                    headers_seen = httpx.Headers(list(response.headers))
                    streamed = httpx.Response(status, headers=headers_seen, stream=_Body(response.body))
                    await self._read_stream(EventSource(streamed), request_id)
                else:
                    answer = await self._read_body(response.body)
        except (httpx.HTTPError, Http1Error) as exc:
            if request_id is None:
                return None
            return _error_frame(request_id, f"HTTP request failed: {type(exc).__name__}")
        self._start_listening()
        return answer

    async def _read_body(self, chunks: AsyncIterator[bytes]) -> bytes:
        body = bytearray()
        async for chunk in chunks:
            body += chunk
            if len(body) > self._max:
                raise httpx.DecodingError("response over the message size limit")
        return bytes(body)

    async def _read_stream(self, source: EventSource, request_id: Any) -> None:
        """Relay a POST's SSE stream; if it ends before our answer, resume it with GET + Last-Event-ID."""
        last_id, retry_ms, answered = await self._relay(source, request_id)
        for _ in range(_MAX_RESUMES):
            if answered or last_id is None or self.modern:  # 2026-07-28 streams are not resumable
                break
            await anyio.sleep((retry_ms or 1000) / 1000)
            headers = {**self._headers("text/event-stream"), "Last-Event-ID": last_id}
            async with aconnect_sse(self._client, "GET", self._url, headers=headers) as resumed:
                if resumed.response.status_code != 200:
                    break
                next_id, retry_ms, answered = await self._relay(resumed, request_id)
                last_id = next_id or last_id
        if not answered:
            await self._deliver(_error_frame(request_id, "closed its response stream without answering"))

    async def _relay(self, source: EventSource, request_id: Any) -> tuple[str | None, int | None, bool]:
        last_id: str | None = None
        retry_ms: int | None = None
        answered = False
        with suppress(httpx.HTTPError):
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
                async with aconnect_sse(self._client, "GET", self._url, headers=headers) as source:
                    status = source.response.status_code
                    if status == 405:
                        return  # the server offers no stream: fine, it can still answer requests
                    if status == 404:
                        self._end()
                        return
                    if status == 200:
                        delay = 1.0
                        async for event in source.aiter_sse():
                            last_id = event.id or last_id
                            delay = (event.retry or 1000) / 1000
                            if event.data:
                                await self._deliver(event.data.encode())
            except httpx.HTTPError as exc:
                log.debug("upstream_stream_dropped", error=type(exc).__name__)
            await anyio.sleep(delay)
            delay = min(delay * 2, 30.0)

    async def terminate(self) -> None:
        """Tell the server we are done with the session (it may refuse with 405; either is fine)."""
        if self.session_id is not None:
            with suppress(httpx.HTTPError), anyio.move_on_after(2):
                await self._client.delete(self._url, headers=self._headers("application/json"))


class _Body(httpx.AsyncByteStream):
    """A response body as httpx reads one, so httpx-sse can parse an SSE answer."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._chunks:
            yield chunk


def _client(headers: Mapping[str, str], timeout_s: float) -> httpx.AsyncClient:
    """httpx for an upstream's long-lived and rare requests: its configured headers on each, no
    redirects (an upstream URL is configured, not discovered), bodies never timed out (SSE streams stay
    open; the caller times each request)."""
    return httpx.AsyncClient(headers=dict(headers), timeout=httpx.Timeout(timeout_s, read=None), follow_redirects=False)


def _answers(data: bytes, request_id: Any) -> bool:
    with suppress(ValueError):
        message = json.loads(data)
        return isinstance(message, dict) and message.get("id") == request_id and "method" not in message
    return False


@asynccontextmanager
async def open_streamable_http(
    url: str,
    headers: Mapping[str, str],
    *,
    timeout_s: float,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> AsyncIterator[StreamableHttpStream]:
    async with _client(headers, timeout_s) as client, anyio.create_task_group() as tg:
        stream = StreamableHttpStream(client, url, tg, max_message_bytes, headers=headers, timeout_s=timeout_s)
        try:
            yield stream
        finally:
            with anyio.CancelScope(shield=True):
                await stream.terminate()
            await stream.aclose()
            tg.cancel_scope.cancel()


class LegacySseStream(_HttpStream):
    async def _post(self, frame: bytes) -> None:
        request_id = _request_id(frame)
        try:
            async with self._posts.post(self._target, [(b"content-type", b"application/json")], frame) as response:
                async for _ in response.body:  # read to the end: the connection is then reused
                    pass
            failed = response.status >= 300
            reason = f"answered HTTP {response.status}"
        except Http1Error as exc:
            failed, reason = True, f"HTTP request failed: {exc}"
        if failed and request_id is not None:
            await self._deliver(_error_frame(request_id, reason))

    async def pump(self, events: AsyncIterator[ServerSentEvent]) -> None:
        with suppress(httpx.HTTPError):
            async for event in events:
                if event.event == "message" and event.data:
                    await self._deliver(event.data.encode())
        self._end()


@asynccontextmanager
async def open_legacy_sse(
    url: str,
    headers: Mapping[str, str],
    *,
    timeout_s: float,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> AsyncIterator[LegacySseStream]:
    """Open the GET stream, wait for its ``endpoint`` event, and POST every frame there."""
    async with (
        _client(headers, timeout_s) as client,
        aconnect_sse(client, "GET", url, headers={"Accept": "text/event-stream"}) as source,
    ):
        if source.response.status_code != 200:
            raise HttpTransportError(f"SSE endpoint answered HTTP {source.response.status_code}")
        events = source.aiter_sse()
        with anyio.fail_after(timeout_s):
            first = await events.__anext__()
        if first.event != "endpoint" or not first.data:
            raise HttpTransportError("the SSE stream did not start with an endpoint event")
        endpoint = urljoin(url, first.data)
        if urlsplit(endpoint)[:2] != urlsplit(url)[:2]:
            raise HttpTransportError("the SSE endpoint event points at another origin")
        async with anyio.create_task_group() as tg:
            stream = LegacySseStream(client, endpoint, tg, max_message_bytes, headers=headers, timeout_s=timeout_s)
            tg.start_soon(stream.pump, events)
            try:
                yield stream
            finally:
                await stream.aclose()
                tg.cancel_scope.cancel()
