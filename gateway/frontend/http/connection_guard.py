"""Bounds on HTTP connections before any request reaches the application: how many connections in all
and per client address, how large and how slow a request's header block may be, and how slow its body.

Without them a client that authenticates nothing can still exhaust the gateway: connections that send
nothing, or a header a byte at a time, hold a slot for ever; one 64 MiB header is buffered whole before
the 401 it earns. The server (uvicorn) bounds none of these, so every connection's protocol is wrapped
in :class:`GuardedProtocol`, which sees the bytes first.

It wraps by composition (uvicorn's ``http=`` takes any protocol class) and finds where each request's
header block and body end with its own llhttp parser (httptools, the parser uvicorn uses), measuring a
block's fields only where a read could hold one over the bound (``header_blocks.py``), and times them on
one timer (``timeouts.py``): nothing here parses HTTP by hand, and nothing here knows about MCP.

An answer given before the request has all arrived (its own refusals, 431, 408 and 503, and the
application's, such as a 413, after which the server closes) leaves as HTTP servers send it: the write
side is shut after it, and what the client still sends is read and dropped, for as long as a silent
connection may wait for its header block and up to ``LINGER_MAX_BYTES``, then the connection closes
(at once when the client has sent all it will).
Closing with unread input would have the kernel reset the connection, and a client still sending (as
most do before they read) would lose the answer. A lingering connection still counts against the bounds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, cast

import httptools
import structlog

from gateway.frontend.http.connection_bounds import ConnectionBounds, ConnectionCounter, refusal
from gateway.frontend.http.header_blocks import HeaderBlocks
from gateway.frontend.http.timeouts import Timeouts

log = structlog.get_logger("gateway.http")

CONNECTION: ContextVar[GuardedProtocol | None] = ContextVar("gateway.connection", default=None)
"""The connection whose bytes the server is being handed: set while the inner protocol parses them, so
the task the server starts for a request (a copy of the context at that moment) knows its connection,
and can ask to hear when the connection is lost (``on_lost``) without a task of its own waiting for it."""

_KEEP, _NONE, _HEADER, _BODY = range(4)
"""What a parsed read does to the request's clock: leaves it, stops it, or starts the header block's or
the body's time-out (the moment is the read's: a callback fires within it)."""

LINGER_MAX_BYTES = 256 * 1024 * 1024
"""How much of what a client still sends after its answer is read (and dropped) before the connection closes."""


class _InnerTransport:
    """The transport as the inner protocol sees it: the real one, except that its close is the guard's
    (a lingering close while the request is still arriving) and that nothing more is written once the
    guard has shut the write side. Bound methods are copied, so writing costs no extra call."""

    def __init__(self, transport: asyncio.Transport, guard: GuardedProtocol) -> None:
        self._transport = transport
        self._guard = guard
        self.write = transport.write
        self.get_extra_info = transport.get_extra_info
        self.pause_reading = transport.pause_reading
        self.resume_reading = transport.resume_reading

    def close(self) -> None:
        self._guard.inner_closes()

    def is_closing(self) -> bool:
        return self._guard.lingering or self._transport.is_closing()

    def stop_writing(self) -> None:
        self.write = self._dropped

    @staticmethod
    def _dropped(data: bytes | bytearray | memoryview) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


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
        self._inner_transport: _InnerTransport | None = None  # set once the inner protocol has the connection
        self._address: str | None = None  # set once counted in
        self._parser: httptools.HttpRequestParser | None = None
        self._in_headers = True  # the connection starts waiting for a request's header block
        self._header_bytes = 0  # raw bytes of reads that ended inside the header block (see HeaderBlocks)
        self._blocks: HeaderBlocks | None = None  # exact block sizes, for reads that could hold one too large
        self._unmeasured_read = 0  # the length of a read that began inside a body with no HeaderBlocks, else 0
        self._block_unmeasured = False  # the block being read began in such a read: measured by read lengths
        self._over_bound = False  # a block of the read being parsed is over the bound
        self._body_bytes = 0  # bytes of reads that began in the request's body (its trailers included)
        self._began_in_read = False  # a request began during the read being parsed
        self._request_open = False  # a request began and has not all arrived
        self._served_one = False
        self._timeouts = Timeouts(loop)  # the header block's or the body's time-out, or the linger's
        self._clock = _KEEP  # the clock the read being parsed asks for, set once it is parsed
        self._on_lost: set[Callable[[], None]] = set()  # told once when the client is gone
        self.lingering = False  # answered and shut for writing: what arrives is dropped
        self._drained = 0
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
            transport.write(
                refusal(503, "Service Unavailable", f"Service Unavailable: {refused}", **{"Retry-After": "5"})
            )
            self._linger()
            return
        self._address = address
        self._parser = httptools.HttpRequestParser(self)
        self._timeouts.start(self._bounds.header_timeout_s, self._header_timeout)  # a connection that never speaks
        self._inner_transport = _InnerTransport(transport, self)
        self._inner.connection_made(cast("asyncio.Transport", self._inner_transport))

    def data_received(self, data: bytes) -> None:
        if self.lingering or self._closed:
            self._drain(len(data))
            return
        parser = self._parser
        if parser is not None:
            blocks = self._blocks
            at_boundary = not self._request_open  # (the bytes of a read that began no request are its own)
            if blocks is not None:
                blocks.feed(data)  # first: a request whose block is too large is not taken as complete
            elif not at_boundary:
                self._unmeasured_read = len(data)  # (a request may begin behind the body: pipelined)
            elif len(data) > self._bounds.max_header_bytes:
                blocks = self._blocks = HeaderBlocks()
                blocks.feed(data)
            was_in_headers = self._in_headers
            in_body = self._request_open and not was_in_headers
            self._began_in_read = self._over_bound = False
            try:
                parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                pass  # (below)
            except httptools.HttpParserError:
                self._parser = None  # the server's own parser refuses it the same way; the clock still runs
            self._unmeasured_read = 0
            clock, self._clock = self._clock, _KEEP
            # An upgrade request is served as any other: the server is run without WebSockets (ws="none"), so
            # it answers and reads on in HTTP, its parser resumed after the request as ours is (the rest
            # of the read dropped by both). A server that did upgrade would take the transport from us.
            if clock is not _KEEP and not (self.lingering or self._closed):
                self._set_clock(clock)
            if self.lingering or self._closed:
                return
            if was_in_headers and self._in_headers and not self._began_in_read:
                self._header_bytes += len(data)  # a block still arriving: what it has sent so far
            elif in_body:
                self._body_bytes += len(data)
                if self._body_bytes > self._bounds.max_body_bytes:
                    self._body_too_large()
                    return
            if not self._request_open:
                self._blocks = None  # between requests: the next read is judged by its length again
            elif blocks is None and at_boundary and self._in_headers:  # a block goes on into the next read:
                blocks = self._blocks = HeaderBlocks()  # measured from where it began, this read parsed again
                blocks.feed(data)
            largest = blocks.largest if blocks is not None else 0
            if self._over_bound or max(self._header_bytes, largest) > self._bounds.max_header_bytes:
                self._refuse_headers()
                return
        token = CONNECTION.set(self)
        try:
            self._inner.data_received(data)
        finally:
            CONNECTION.reset(token)

    def eof_received(self) -> bool | None:
        if self.lingering:
            self._close()  # the client has sent all it will: nothing is left unread
            return None
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._timeouts.close()
        self._closed = True
        if self._address is not None:
            self._counter.release(self._address)
            self._address = None
        if self._inner_transport is not None:
            self._inner_transport = None
            self._inner.connection_lost(exc)
        self._tell_lost()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    # ---- llhttp callbacks (our own parser, which only finds the boundaries) -----------------------

    def on_message_begin(self) -> None:
        self._began_in_read = True
        self._request_open = True
        self._in_headers = True
        self._header_bytes = self._unmeasured_read  # all of it: where the block began in it is not known
        self._block_unmeasured = self._unmeasured_read != 0
        if self._header_bytes > self._bounds.max_header_bytes:
            self._over_bound = True
        if self._served_one:  # the first request's clock started with the connection
            self._clock = _HEADER

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._clock = _BODY
        self._body_bytes = 0
        if self._block_unmeasured and not self._began_in_read:  # its last read, counted whole as well
            self._header_bytes += self._unmeasured_read
            if self._header_bytes > self._bounds.max_header_bytes:
                self._over_bound = True  # (a request behind it in this read starts its own count)

    def on_message_complete(self) -> None:
        blocks = self._blocks
        if self._over_bound or (blocks is not None and blocks.largest > self._bounds.max_header_bytes):
            return  # read whole in this read, refused once the read is parsed: nothing in it was served
        self._request_open = False
        self._served_one = True
        self._clock = _NONE  # between requests, the server's keep-alive timeout applies

    # ---- the bounds ---------------------------------------------------------------------------

    def _set_clock(self, clock: int) -> None:
        """The clock the parsed read left running: the callbacks only say which (the last one wins), so a
        request that arrives whole in one read, as nearly all do, arms and cancels no timer at all."""
        if clock == _NONE:
            self._timeouts.stop()
        elif clock == _HEADER:
            self._timeouts.start(self._bounds.header_timeout_s, self._header_timeout)
        else:
            self._timeouts.start(self._bounds.body_timeout_s, self._body_timeout)

    def _refuse_headers(self) -> None:
        limit = self._bounds.max_header_bytes
        log.warning("request_headers_too_large", client=self._address, limit=limit)
        self._refuse(431, "Request Header Fields Too Large", f"the request's header block exceeds {limit} bytes")

    def _header_timeout(self) -> None:
        timeout = self._bounds.header_timeout_s
        log.warning("request_header_timeout", client=self._address, timeout_s=timeout)
        self._refuse(408, "Request Timeout", f"the request's header block did not arrive within {timeout} s")

    def _body_timeout(self) -> None:
        timeout = self._bounds.body_timeout_s
        log.warning("request_body_timeout", client=self._address, timeout_s=timeout)
        self._end_body(408, "Request Timeout", f"the request's body did not arrive within {timeout} s")

    def _body_too_large(self) -> None:
        limit = self._bounds.max_body_bytes
        log.warning("request_too_large", client=self._address, limit=limit)
        self._end_body(413, "Payload Too Large", f"the request exceeds {limit} bytes")

    def _end_body(self, status: int, reason: str, problem: str) -> None:
        """The application is reading the body: if it has not begun its answer, the client is answered
        and the application sees the client go away; an answer already given is left to be read."""
        answer = self._inner_answer()
        if answer == "none":
            self._answer(status, reason, problem)
            self._inner_gone()
        elif answer == "whole":
            self._linger()
        else:
            self._close()

    def _refuse(self, status: int, reason: str, problem: str) -> None:
        """Answer and close; only before anything of this request reached the application, and never on
        a connection whose earlier answer may still be streaming (there, it only closes)."""
        if self._served_one and self._inner_answer() != "whole":
            self._close()
        else:
            self._answer(status, reason, problem)

    def _answer(self, status: int, reason: str, problem: str) -> None:
        assert self._transport is not None  # noqa: S101 - only after connection_made
        self._transport.write(refusal(status, reason, f"{reason}: {problem}"))
        self._linger()

    def _inner_answer(self) -> str:
        """How far the inner protocol (uvicorn's) is with the answer to its latest request: ``none``
        begun, ``partial``, ``whole`` (or no request yet), or ``unknown`` for a protocol that does not say."""
        if not hasattr(self._inner, "cycle"):
            return "unknown"
        cycle = self._inner.cycle  # (uvicorn's request-response cycle: read, never changed)
        if cycle is None:
            return "whole"
        if getattr(self._inner, "pipeline", None):
            return "partial"  # more requests queued behind it
        if getattr(cycle, "response_complete", False):
            return "whole"
        return "partial" if getattr(cycle, "response_started", True) else "none"

    def _inner_gone(self) -> None:
        """Tell the inner protocol the client is gone (its application stops waiting for the body, and
        what it still answers is dropped); the connection itself lingers on."""
        if self._inner_transport is not None:
            self._inner_transport.stop_writing()
            self._inner_transport = None
            self._inner.connection_lost(None)
        self._tell_lost()

    # ---- who hears of the client going ---------------------------------------------------------

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the client is gone (the connection lost, or given up on by a bound),
        unless ``forget`` comes first; at once if it is gone already."""
        if self._closed or self._inner_transport is None:
            callback()
        else:
            self._on_lost.add(callback)

    def forget(self, callback: Callable[[], None]) -> None:
        self._on_lost.discard(callback)

    def _tell_lost(self) -> None:
        told, self._on_lost = self._on_lost, set()
        for callback in told:
            callback()

    # ---- closing ------------------------------------------------------------------------------

    def inner_closes(self) -> None:
        """The inner protocol closes the connection: at once, unless a request is still arriving (an
        answer given before its whole body): then lingering, so that the client reads that answer."""
        if self.lingering:
            return  # the linger decides when
        if self._request_open:
            self._linger()
        else:
            self._close()

    def _linger(self) -> None:
        """Shut the write side once what is written has left, drop what the client still sends, and close
        when it has sent all of it, or once the header time-out has passed or too much has come."""
        transport = self._transport
        if self.lingering or self._closed or transport is None:
            return
        if not transport.can_write_eof():
            self._close()
            return
        self.lingering = True
        self._parser = None
        if self._inner_transport is not None:
            self._inner_transport.stop_writing()
        transport.write_eof()
        transport.resume_reading()  # the server may have paused it (a body it had not asked for yet)
        self._timeouts.start(self._bounds.header_timeout_s, self._close)

    def _drain(self, size: int) -> None:
        self._drained += size
        if self._drained > LINGER_MAX_BYTES:
            self._close()

    def _close(self) -> None:
        self._closed = True
        self._timeouts.close()
        if self._transport is not None:
            self._transport.close()


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
