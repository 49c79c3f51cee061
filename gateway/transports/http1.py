"""A lean HTTP/1.1 client for the upstream hot path: h11 for the protocol, anyio for the sockets.

Every upstream request is a POST to one origin. httpcore serves that well but, per request, scans every
pooled connection (is it idle? has its socket been closed?) and writes headers and body separately;
at a few dozen connections that was most of the gateway's CPU on the HTTP path (README, Performance).
Here idle connections wait in a LIFO stack: a request takes the most recently used one (checked with
one ``poll``, and only when it has been idle long enough for a server to have closed it) or opens a
new one, and writes its head and body in one send. Responses stream as h11 parses them.
"""

from __future__ import annotations

import select
import socket
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import anyio.abc
import h11

IDLE_CHECK_AFTER_S = 1.0
"""A connection idle for less than this is reused without asking the socket whether the server closed
it: servers keep idle connections open for seconds (uvicorn: 5 s), not for milliseconds."""

_READ_SIZE = 64 * 1024
_BROKEN = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, h11.ProtocolError)


class Http1Error(Exception):
    """The connection failed or the server broke HTTP/1.1: the request did not get an answer."""


@dataclass
class _Connection:
    stream: anyio.abc.ByteStream
    protocol: h11.Connection
    idle_since: float
    sock: socket.socket | None  # looked up once: anyio builds every socket attribute on each lookup

    def closed_by_server(self) -> bool:
        if time.monotonic() - self.idle_since < IDLE_CHECK_AFTER_S:
            return False
        sock = self.sock
        if sock is None or sock.fileno() < 0:
            return True  # nothing to ask: do not reuse it
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))  # an idle HTTP/1.1 socket with something to read is being closed


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


class Http1Pool:
    """Keep-alive connections to one origin; ``max_idle`` of them are kept between requests."""

    def __init__(self, url: str, *, headers: Sequence[tuple[bytes, bytes]], connect_timeout_s: float) -> None:
        parts = urlsplit(url)
        self._tls = parts.scheme == "https"
        self._host = parts.hostname or "localhost"
        self._port = parts.port or (443 if self._tls else 80)
        default_port = self._port == (443 if self._tls else 80)
        self._authority = (self._host if default_port else f"{self._host}:{self._port}").encode()
        self._headers = [(b"host", self._authority), *headers]
        self._connect_timeout_s = connect_timeout_s
        self._ssl_context = ssl.create_default_context() if self._tls else None
        self._idle: list[_Connection] = []
        self.max_idle = 64

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
        return _Connection(stream, h11.Connection(h11.CLIENT), time.monotonic(), sock)

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
        head = [*self._headers, *headers, (b"content-length", str(len(body)).encode())]
        connection, fresh = await self._checkout()
        reusable = False
        try:
            try:
                response = await self._send(connection, target, head, body)
            except _BROKEN as exc:
                if fresh:
                    raise Http1Error(f"the connection failed: {type(exc).__name__}") from exc
                # The server closed this kept-alive connection as we reused it (no answer began): the
                # request never reached it. Once more, on a new connection.
                await anyio.aclose_forcefully(connection.stream)
                connection, fresh = await self._connect(), True
                try:
                    response = await self._send(connection, target, head, body)
                except _BROKEN as exc_again:
                    raise Http1Error(f"the connection failed: {type(exc_again).__name__}") from exc_again
            protocol = connection.protocol
            if not isinstance(response, h11.Response):
                raise Http1Error("the server did not answer with a response")
            finished = False

            async def body_chunks() -> AsyncIterator[bytes]:
                nonlocal finished
                while True:
                    try:
                        event = await _next_event(connection)
                    except _BROKEN as exc:
                        raise Http1Error(f"the response broke off: {type(exc).__name__}") from exc
                    if isinstance(event, h11.Data):
                        yield bytes(event.data)
                    elif isinstance(event, h11.EndOfMessage):
                        finished = True
                        return

            yield Answer(response.status_code, list(response.headers), body_chunks())
            if finished and protocol.our_state is h11.DONE and protocol.their_state is h11.DONE:
                protocol.start_next_cycle()
                reusable = True
        finally:
            if reusable and len(self._idle) < self.max_idle:
                connection.idle_since = time.monotonic()
                self._idle.append(connection)
            else:
                await anyio.aclose_forcefully(connection.stream)

    @staticmethod
    async def _send(connection: _Connection, target: str, head: list[tuple[bytes, bytes]], body: bytes) -> object:
        """Send the request in one write and wait for the response head."""
        protocol = connection.protocol
        request = h11.Request(method="POST", target=target, headers=head)
        data = b"".join(protocol.send(event) or b"" for event in (request, h11.Data(data=body), h11.EndOfMessage()))
        await connection.stream.send(data)
        return await _next_event(connection)

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            await anyio.aclose_forcefully(connection.stream)


async def _next_event(connection: _Connection) -> object:
    """The next h11 event of the response; the server closing early shows as h11's own error."""
    protocol = connection.protocol
    while True:
        event = protocol.next_event()
        if event is not h11.NEED_DATA:
            return event
        try:
            data = await connection.stream.receive(_READ_SIZE)
        except anyio.EndOfStream:
            data = b""
        protocol.receive_data(data)
