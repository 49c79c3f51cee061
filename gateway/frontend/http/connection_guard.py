"""Bounds on HTTP connections before any request reaches the application: how many connections in all
and per client address, how large and how slow a request's header block may be, and how slow its body.

Without them a client that authenticates nothing can still exhaust the gateway: connections that send
nothing, or a header a byte at a time, hold a slot for ever; one 64 MiB header is buffered whole before
the 401 it earns. The server (uvicorn) bounds none of these, so every connection's protocol is wrapped
in :class:`GuardedProtocol`, which sees the bytes first.

It wraps by composition (uvicorn's ``http=`` takes any protocol class) and finds where each request's
header block and body end with its own llhttp parser (httptools, the parser uvicorn uses): nothing here
parses HTTP by hand, and nothing here knows about MCP.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import httptools
import structlog

log = structlog.get_logger("gateway.http")

LINGER_S = 2.0
"""How long a refused connection is read (and the input dropped) before it is closed."""


@dataclass(frozen=True, slots=True)
class ConnectionBounds:
    max_connections: int
    max_connections_per_client: int
    max_header_bytes: int
    header_timeout_s: float
    body_timeout_s: float


class ConnectionCounter:
    """Open connections, in all and per client address, shared by every connection of one server."""

    def __init__(self) -> None:
        self.total = 0
        self.per_address: Counter[str] = Counter()

    def admit(self, address: str, bounds: ConnectionBounds) -> str | None:
        """Count the connection in, or say which bound refuses it."""
        if self.total >= bounds.max_connections:
            return f"the gateway has {bounds.max_connections} connections open"
        if self.per_address[address] >= bounds.max_connections_per_client:
            return f"{bounds.max_connections_per_client} connections are open from this address"
        self.total += 1
        self.per_address[address] += 1
        return None

    def release(self, address: str) -> None:
        self.total -= 1
        self.per_address[address] -= 1
        if self.per_address[address] <= 0:
            del self.per_address[address]


def _refusal(status: int, reason: str, message: str, **headers: str) -> bytes:
    """A whole HTTP/1.1 response that closes the connection, its body a JSON-RPC error without an id
    (as the front end's own refusals are)."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    head = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json", f"Content-Length: {len(body)}"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class GuardedProtocol(asyncio.Protocol):
    """One connection: counted against the bounds, its requests timed and measured, everything else
    passed to ``inner`` untouched (flow control included)."""

    def __init__(
        self,
        inner: asyncio.Protocol,
        bounds: ConnectionBounds,
        counter: ConnectionCounter,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._inner = inner
        self._bounds = bounds
        self._counter = counter
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._address: str | None = None  # set once counted in
        self._parser: httptools.HttpRequestParser | None = None
        self._in_headers = True  # the connection starts waiting for a request's header block
        self._header_bytes = 0  # raw bytes of reads that ended inside the header block
        self._parsed_header_bytes = 0  # the block as parsed: request target and fields, however it was read
        self._began_in_read = False  # a request began during the read being parsed
        self._served_one = False
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    # ---- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast("asyncio.Transport", transport)  # a stream server's (uvloop's are no subclasses)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        refused = self._counter.admit(address, self._bounds)
        if refused is not None:
            log.warning("connection_refused", client=address, reason=refused)
            self._answer_and_close(
                _refusal(503, "Service Unavailable", f"Service Unavailable: {refused}", **{"Retry-After": "5"})
            )
            return
        self._address = address
        self._parser = httptools.HttpRequestParser(self)
        self._arm(self._bounds.header_timeout_s, self._header_timeout)  # a connection that never speaks
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return  # refused: dropped until the linger ends
        if self._parser is not None:
            was_in_headers = self._in_headers
            self._began_in_read = False
            try:
                self._parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                self._stop_watching()  # another protocol from here on: not ours to time
            except httptools.HttpParserError:
                self._parser = None  # the server's own parser refuses it the same way; the clock still runs
            if self._closed:
                return
            if was_in_headers and self._in_headers and not self._began_in_read:
                self._header_bytes += len(data)  # a block still arriving: what it has sent so far
            # (a read in which a request began may hold earlier requests too: their bytes are not this
            # block's, so such a read is counted by the parsed fields alone)
            if max(self._header_bytes, self._parsed_header_bytes) > self._bounds.max_header_bytes:
                self._refuse_headers()
                return
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        if self._address is not None:
            self._counter.release(self._address)
            self._address = None
            self._inner.connection_lost(exc)
        self._closed = True

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    # ---- llhttp callbacks (our own parser, which only finds the boundaries) -----------------------

    def on_message_begin(self) -> None:
        self._began_in_read = True
        self._in_headers = True
        self._header_bytes = 0
        self._parsed_header_bytes = 0
        if self._served_one:  # the first request's clock started with the connection
            self._arm(self._bounds.header_timeout_s, self._header_timeout)

    def on_url(self, url: bytes) -> None:
        self._parsed_header_bytes += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._parsed_header_bytes += len(name) + len(value) + 4  # ": " and CRLF

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._arm(self._bounds.body_timeout_s, self._body_timeout)

    def on_message_complete(self) -> None:
        if self._parsed_header_bytes > self._bounds.max_header_bytes:
            return  # read whole in this read, refused once the read is parsed: this request was never served
        self._served_one = True
        self._cancel_timer()  # between requests, the server's keep-alive timeout applies

    # ---- the bounds ---------------------------------------------------------------------------

    def _refuse_headers(self) -> None:
        limit = self._bounds.max_header_bytes
        log.warning("request_headers_too_large", client=self._address, limit=limit)
        self._refuse(431, "Request Header Fields Too Large", f"the request's header block exceeds {limit} bytes")

    def _header_timeout(self) -> None:
        timeout = self._bounds.header_timeout_s
        log.warning("request_header_timeout", client=self._address, timeout_s=timeout)
        self._refuse(408, "Request Timeout", f"the request's header block did not arrive within {timeout} s")

    def _body_timeout(self) -> None:
        log.warning("request_body_timeout", client=self._address, timeout_s=self._bounds.body_timeout_s)
        self._close()  # the application is reading the body: it sees the client go away

    def _refuse(self, status: int, reason: str, problem: str) -> None:
        """Answer and close; only before anything of this request reached the application, and never on
        a connection whose earlier answer may still be streaming (there, it only closes). The answer
        leaves with a half close and what the client still sends is read and dropped for a moment:
        closing with unread input would reset the connection and lose the answer before it is read."""
        if self._served_one:
            self._close()
        else:
            self._answer_and_close(_refusal(status, reason, f"{reason}: {problem}"))

    def _answer_and_close(self, response: bytes) -> None:
        self._closed = True  # nothing more reaches the application
        self._parser = None
        transport = self._transport
        assert transport is not None  # noqa: S101 - only after connection_made
        transport.write(response)
        if not transport.can_write_eof():
            self._close()
            return
        transport.write_eof()
        self._arm(LINGER_S, self._close)

    def _close(self) -> None:
        self._closed = True
        self._cancel_timer()
        if self._transport is not None:
            self._transport.close()

    def _stop_watching(self) -> None:
        self._parser = None
        self._cancel_timer()

    def _arm(self, delay: float, callback: Callable[[], None]) -> None:
        self._cancel_timer()
        self._timer = self._loop.call_later(delay, callback)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def guarded(protocol_class: Callable[..., asyncio.Protocol], bounds: ConnectionBounds) -> type[asyncio.Protocol]:
    """A protocol class for ``uvicorn.Config(http=...)``: ``protocol_class`` behind the bounds, with one
    counter for every connection the server accepts."""
    counter = ConnectionCounter()

    class Guarded(GuardedProtocol):
        def __init__(self, *, _loop: asyncio.AbstractEventLoop | None = None, **kwargs: Any) -> None:
            loop = _loop or asyncio.get_running_loop()
            super().__init__(protocol_class(_loop=loop, **kwargs), bounds, counter, loop)

    Guarded.counter = counter  # type: ignore[attr-defined]
    return Guarded
