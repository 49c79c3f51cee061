"""A lean HTTP/1.1 client for the upstream hot path: llhttp (via httptools) parses, an asyncio protocol
moves the bytes.

Every upstream request is a POST to one origin. httpcore serves that well but, per request, scans every
pooled connection (is it idle? has its socket been closed?) and writes headers and body separately;
at a few dozen connections that was most of the gateway's CPU on the HTTP path (docs/performance.md).
Here idle connections wait in a LIFO stack: a request takes the most recently used one that the
server has not closed (the protocol is told when it does) or opens a new one, and writes its head and
body in one write. Responses are parsed as their bytes arrive, by the same C parser uvicorn uses (a
fifth of the cost of h11, which this client used before), straight from the transport's callback: no
stream layer between the socket and the parser (anyio's costs a loop turn per send).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import anyio
import httptools

_PAUSE_READING_AT = 256 * 1024
"""Bytes of answer waiting to be read before the socket stops being read (a slow consumer of an SSE
answer must not make the gateway buffer without bound)."""


class Http1Error(Exception):
    """The connection failed or the server broke HTTP/1.1: the request did not get an answer."""


class _Response:
    """httptools' callbacks for one connection: the response being read, as the parser sees it."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_done = False
        self.chunks: list[bytes] = []
        self.done = False
        self.keep_alive = False  # read when the message completes: llhttp forgets it right after
        self.stray = False

    def on_message_begin(self) -> None:  # also after an interim 1xx answer: the real one starts afresh
        if self.done:
            self.stray = True  # a second answer nobody asked for: ignored, and the connection not reused
            return
        self.headers = []
        self.head_done = False

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.done:
            self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if status >= 200 and not self.done:
            self.status = status
            self.head_done = True

    def on_body(self, body: bytes) -> None:
        if not self.done:
            self.chunks.append(body)

    def on_message_complete(self) -> None:
        if self.head_done and not self.done:
            self.done = True
            self.keep_alive = self.parser.should_keep_alive()

    def ends_at_close(self) -> bool:
        """A body with neither length nor chunking runs until the server closes (RFC 9112, 6.3)."""
        names = {name for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names


class _Connection(asyncio.Protocol):
    """One kept-alive connection: the transport's callbacks feed the parser and wake the request."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.response = _Response()
        self.ended = False  # the server closed it, or it broke: never reused
        self.idle = False  # in the pool, between requests
        self.error: Exception | None = None
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # a stream connection's (uvloop's is no subclass)

    def data_received(self, data: bytes) -> None:
        if self.idle:  # nothing was asked: a server talking out of turn is not spoken to again
            self.close()
            return
        before = len(self.response.chunks)
        try:
            self.response.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.error = exc
            self.close()
        self._buffered += sum(len(chunk) for chunk in self.response.chunks[before:])
        if self._buffered > _PAUSE_READING_AT and self.transport is not None:
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool | None:
        self.ended = True
        self._wake()
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        if exc is not None and self.error is None:
            self.error = exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def wait(self) -> None:
        """Until the transport next reports something (data, end, error)."""
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def take_chunks(self) -> list[bytes]:
        chunks, self.response.chunks = self.response.chunks, []
        if self._buffered > _PAUSE_READING_AT and self.transport is not None:
            self.transport.resume_reading()
        self._buffered = 0
        return chunks

    def write(self, data: bytes) -> None:
        if self.ended or self.transport is None or self.transport.is_closing():
            raise Http1Error("the connection is closed")
        self.transport.write(data)

    def close(self) -> None:
        self.ended = True
        if self.transport is not None:
            self.transport.abort()


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Sequence[tuple[bytes, bytes]]
    body: AsyncIterator[bytes]

    def header(self, name: bytes) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value.decode("latin-1")
        return None


def _breaks_framing(data: bytes) -> bool:
    """Whether ``data`` would end a line of the request early (CR, LF) or be cut at a NUL."""
    return b"\r" in data or b"\n" in data or b"\0" in data


def _header_lines(headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    """The header block, refusing any name or value that would split the request (checked on the
    joined bytes: a few scans in C instead of a loop per header)."""
    names = b"".join([name for name, _ in headers])
    if b":" in names or _breaks_framing(names + b"".join([value for _, value in headers])):
        raise Http1Error(f"refusing to send a malformed header (among {names!r}): a ':' in a name, or CR, LF or NUL")
    return b"".join([name + b": " + value + b"\r\n" for name, value in headers])


class Http1Pool:
    """Keep-alive connections to one origin; ``max_idle`` of them are kept between requests."""

    def __init__(self, url: str, *, headers: Sequence[tuple[bytes, bytes]], connect_timeout_s: float) -> None:
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if tls else 80)
        authority = self._host if self._port == (443 if tls else 80) else f"{self._host}:{self._port}"
        self._fixed_headers = _header_lines([(b"host", authority.encode()), *headers])  # checked once
        self._connect_timeout_s = connect_timeout_s
        self._ssl_context = ssl.create_default_context() if tls else None
        self._idle: list[_Connection] = []
        self.max_idle = 64

    @property
    def idle_count(self) -> int:
        """Connections kept for reuse."""
        return len(self._idle)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            with anyio.fail_after(self._connect_timeout_s):
                _, connection = await loop.create_connection(_Connection, self._host, self._port, ssl=self._ssl_context)
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise Http1Error(f"cannot connect: {type(exc).__name__}") from exc
        return connection

    def _checkout(self) -> _Connection | None:
        """The most recently used connection the server has not closed, if any."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.ended:
                connection.idle = False
                return connection
        return None

    @asynccontextmanager
    async def post(self, target: str, headers: Sequence[tuple[bytes, bytes]], body: bytes) -> AsyncIterator[Answer]:
        """POST ``body`` and yield the answer as it arrives; the connection goes back to the pool only
        when the answer was read to its end (else it is closed: it is mid-response)."""
        raw_target = target.encode()
        if b" " in raw_target or _breaks_framing(raw_target):
            raise Http1Error(f"refusing to send a malformed request target {target!r}")
        request = b"".join(
            (
                b"POST %s HTTP/1.1\r\n" % raw_target,
                self._fixed_headers,
                _header_lines(headers),
                b"content-length: %d\r\n\r\n" % len(body),
                body,
            )
        )
        reused = self._checkout()
        connection = reused if reused is not None else await self._connect()
        reusable = False
        try:
            try:
                await self._send(connection, request)
            except Http1Error:
                if reused is None:
                    raise
                # The server closed this kept-alive connection as we reused it (no answer began): the
                # request never reached it. Once more, on a new connection.
                connection.close()
                connection = await self._connect()
                await self._send(connection, request)
            response = connection.response

            async def body_chunks() -> AsyncIterator[bytes]:
                while True:
                    chunks = connection.take_chunks()
                    for chunk in chunks:
                        yield chunk
                    if chunks:
                        continue  # more may have arrived while those were read
                    if response.done:
                        return
                    if connection.error is not None:
                        raise Http1Error(f"the response broke off: {type(connection.error).__name__}")
                    if connection.ended:
                        if response.ends_at_close():
                            return
                        raise Http1Error("the response broke off: the server closed the connection")
                    await connection.wait()

            yield Answer(response.status, response.headers, body_chunks())
            reusable = response.done and response.keep_alive and not (connection.ended or response.stray)
        finally:
            if reusable and len(self._idle) < self.max_idle:
                connection.response = _Response()
                connection.idle = True
                self._idle.append(connection)
            else:
                connection.close()

    @staticmethod
    async def _send(connection: _Connection, request: bytes) -> None:
        """Send the request in one write and wait for the response head."""
        connection.write(request)
        while not connection.response.head_done:
            if connection.error is not None:
                raise Http1Error(f"the connection failed: {type(connection.error).__name__}")
            if connection.ended:
                raise Http1Error("the connection failed: the server closed it")
            await connection.wait()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
