"""A lean HTTP/1.1 client for the upstream hot path: llhttp (via httptools) parses, anyio moves bytes.

Every upstream request is a POST to one origin. httpcore serves that well but, per request, scans every
pooled connection (is it idle? has its socket been closed?) and writes headers and body separately;
at a few dozen connections that was most of the gateway's CPU on the HTTP path (README, Performance).
Here idle connections wait in a LIFO stack: a request takes the most recently used one (checked with
one ``poll``, and only when it has been idle long enough for a server to have closed it) or opens a
new one, and writes its head and body in one send. Responses stream as llhttp parses them: the same C
parser uvicorn uses, a fifth of the cost of h11, which this client used before.
"""

from __future__ import annotations

import select
import socket
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httptools

IDLE_CHECK_AFTER_S = 1.0
"""A connection idle for less than this is reused without asking the socket whether the server closed
it: servers keep idle connections open for seconds (uvicorn: 5 s), not for milliseconds."""

_READ_SIZE = 64 * 1024
_BROKEN = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, httptools.HttpParserError)


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

    def on_message_begin(self) -> None:  # also after an interim 1xx answer: the real one starts afresh
        self.headers = []
        self.head_done = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if status >= 200:
            self.status = status
            self.head_done = True

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        if self.head_done:
            self.done = True
            self.keep_alive = self.parser.should_keep_alive()

    def ends_at_close(self) -> bool:
        """A body with neither length nor chunking runs until the server closes (RFC 9112, 6.3)."""
        names = {name for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names


@dataclass
class _Connection:
    stream: anyio.abc.ByteStream
    idle_since: float
    sock: socket.socket | None  # looked up once: anyio builds every socket attribute on each lookup
    response: _Response = field(default_factory=_Response)

    def closed_by_server(self) -> bool:
        if time.monotonic() - self.idle_since < IDLE_CHECK_AFTER_S:
            return False
        sock = self.sock
        if sock is None or sock.fileno() < 0:
            return True  # nothing to ask: do not reuse it
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))  # an idle HTTP/1.1 socket with something to read is being closed

    async def feed(self) -> bool:
        """Read once and parse it; False when the server closed the connection."""
        try:
            data = await self.stream.receive(_READ_SIZE)
        except anyio.EndOfStream:
            return False
        self.response.parser.feed_data(data)
        return True


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


def _header_lines(headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    """The header block, refusing any name or value that would split the request (checked on the
    joined bytes: a few scans in C instead of a loop per header)."""
    names = b"".join([name for name, _ in headers])
    probe = names + b"".join([value for _, value in headers])
    if b":" in names or b"\r" in probe or b"\n" in probe or b"\0" in probe:
        raise Http1Error(f"refusing to send a malformed header (among {names!r}): a ':' in a name, or CR, LF or NUL")
    return b"".join([name + b": " + value + b"\r\n" for name, value in headers])


class Http1Pool:
    """Keep-alive connections to one origin; ``max_idle`` of them are kept between requests."""

    def __init__(self, url: str, *, headers: Sequence[tuple[bytes, bytes]], connect_timeout_s: float) -> None:
        parts = urlsplit(url)
        self._tls = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self._tls else 80)
        default_port = self._port == (443 if self._tls else 80)
        self._authority = (self._host if default_port else f"{self._host}:{self._port}").encode()
        self._fixed_headers = _header_lines([(b"host", self._authority), *headers])  # checked once
        self._connect_timeout_s = connect_timeout_s
        self._ssl_context = ssl.create_default_context() if self._tls else None
        self._idle: list[_Connection] = []
        self.max_idle = 64

    @property
    def idle_count(self) -> int:
        """Connections kept for reuse."""
        return len(self._idle)

    async def _connect(self) -> _Connection:
        stream: anyio.abc.ByteStream
        try:
            with anyio.fail_after(self._connect_timeout_s):
                if self._ssl_context is None:
                    stream = await anyio.connect_tcp(self._host, self._port)
                else:
                    stream = await anyio.connect_tcp(
                        self._host, self._port, ssl_context=self._ssl_context, tls_standard_compatible=False
                    )
        except (OSError, TimeoutError, anyio.BrokenResourceError) as exc:
            raise Http1Error(f"cannot connect: {type(exc).__name__}") from exc
        sock = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)  # noqa: S610 - anyio, not Django
        return _Connection(stream, time.monotonic(), sock)

    async def _checkout(self) -> tuple[_Connection, bool]:
        """A connection, and whether it is fresh (one reused may turn out closed by the server)."""
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed_by_server():
                return connection, False
            await anyio.aclose_forcefully(connection.stream)
        return await self._connect(), True

    @asynccontextmanager
    async def post(self, target: str, headers: Sequence[tuple[bytes, bytes]], body: bytes) -> AsyncIterator[Answer]:
        """POST ``body`` and yield the answer as it arrives; the connection goes back to the pool only
        when the answer was read to its end (else it is closed: it is mid-response)."""
        raw_target = target.encode()
        if b" " in raw_target or b"\r" in raw_target or b"\n" in raw_target or b"\0" in raw_target:
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
        connection, fresh = await self._checkout()
        reusable = False
        try:
            try:
                await self._send(connection, request)
            except _BROKEN as exc:
                if fresh:
                    raise Http1Error(f"the connection failed: {type(exc).__name__}") from exc
                # The server closed this kept-alive connection as we reused it (no answer began): the
                # request never reached it. Once more, on a new connection.
                await anyio.aclose_forcefully(connection.stream)
                connection, fresh = await self._connect(), True
                try:
                    await self._send(connection, request)
                except _BROKEN as exc_again:
                    raise Http1Error(f"the connection failed: {type(exc_again).__name__}") from exc_again
            response = connection.response
            closed = False

            async def body_chunks() -> AsyncIterator[bytes]:
                nonlocal closed
                while True:
                    if response.chunks:
                        chunks, response.chunks = response.chunks, []
                        for chunk in chunks:
                            yield chunk
                    if response.done:
                        return
                    try:
                        if not await connection.feed():
                            closed = True
                            if response.ends_at_close():
                                return
                            raise Http1Error("the response broke off: the server closed the connection")
                    except _BROKEN as exc:
                        raise Http1Error(f"the response broke off: {type(exc).__name__}") from exc

            yield Answer(response.status, response.headers, body_chunks())
            reusable = response.done and not closed and response.keep_alive
        finally:
            if reusable and len(self._idle) < self.max_idle:
                connection.idle_since = time.monotonic()
                connection.response = _Response()
                self._idle.append(connection)
            else:
                await anyio.aclose_forcefully(connection.stream)

    @staticmethod
    async def _send(connection: _Connection, request: bytes) -> None:
        """Send the request in one write and wait for the response head."""
        await connection.stream.send(request)
        while not connection.response.head_done:
            if not await connection.feed():
                raise anyio.EndOfStream

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await anyio.aclose_forcefully(connection.stream)
