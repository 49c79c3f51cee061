"""The header-block bound of the connection guard, sans I/O: request streams of every shape, cut into
reads at any points, fed to the guard in front of a recording inner protocol. A block over the bound
never reaches the server whole, and is refused; blocks within it are never refused, except the one
documented case (a request pipelined behind a body that came in pieces, measured by its reads' lengths).

The guard measures most reads by their length alone and parses a block's fields only where a read could
hold one over the bound, so these are the properties that choice has to keep."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httptools
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway.frontend.http.connection_bounds import ConnectionBounds, ConnectionCounter
from gateway.frontend.http.connection_guard import GuardedProtocol

LIMIT = 1024

BOUNDS = ConnectionBounds(
    max_connections=10, max_connections_per_client=10, max_header_bytes=LIMIT, header_timeout_s=60, body_timeout_s=60
)


@dataclass
class Request:
    padding: int
    body: int

    def wire(self) -> bytes:
        length = str(self.body).encode()
        head = b"POST /x HTTP/1.1\r\nHost: a\r\nX-Pad: " + b"p" * self.padding + b"\r\nContent-Length: " + length
        return head + b"\r\n\r\n" + b"b" * self.body

    def block(self) -> int:
        """Its header block as the bound counts it: request target and fields (name, value, ": ", CRLF)."""
        return len("/x") + (4 + 1 + 4) + (5 + self.padding + 4) + (14 + len(str(self.body)) + 4)

    def head_length(self) -> int:
        return len(self.wire()) - self.body


@dataclass
class Recorder(asyncio.Protocol):
    """The server behind the guard: what it was handed, and the header blocks it parsed whole."""

    received: bytearray = field(default_factory=bytearray)
    blocks: list[int] = field(default_factory=list)
    _current: int = 0

    def __post_init__(self) -> None:
        self._parser = httptools.HttpRequestParser(self)

    def data_received(self, data: bytes) -> None:
        self.received += data
        self._parser.feed_data(data)

    def on_message_begin(self) -> None:
        self._current = 0

    def on_url(self, url: bytes) -> None:
        self._current += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._current += len(name) + len(value) + 4

    def on_headers_complete(self) -> None:
        self.blocks.append(self._current)


class Transport(asyncio.Transport):
    """The socket's side, as the guard uses it: what was written, and whether it was shut or closed."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.shut = self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.shut = True

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        return None

    def resume_reading(self) -> None:
        return None


@contextmanager
def guarded() -> Iterator[tuple[GuardedProtocol, Recorder, Transport]]:
    loop = asyncio.new_event_loop()  # never run: its timers (the time-outs) are armed, none fires
    try:
        inner, transport = Recorder(), Transport()
        guard = GuardedProtocol(inner, BOUNDS, ConnectionCounter(), loop)
        guard.connection_made(transport)
        yield guard, inner, transport
    finally:
        loop.close()


def reads_of(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    return [stream[a:b] for a, b in itertools.pairwise(points) if b > a]


def pipelined_behind_a_body_in_pieces(requests: list[Request], reads: list[bytes]) -> bool:
    """Whether a request begins in a read that began inside an earlier request's body."""
    starts, body_spans, offset = [], [], 0
    for request in requests:
        starts.append(offset)
        body_spans.append((offset + request.head_length(), offset + len(request.wire())))
        offset += len(request.wire())
    position = 0
    for read in reads:
        inside_a_body = any(begin <= position < end for begin, end in body_spans)
        if inside_a_body and any(position < start < position + len(read) for start in starts):
            return True
        position += len(read)
    return False


requests_strategy = st.lists(
    st.builds(Request, padding=st.integers(0, 2 * LIMIT), body=st.integers(0, 3 * LIMIT)), min_size=1, max_size=4
)


@settings(max_examples=400, deadline=None)
@given(requests_strategy, st.lists(st.integers(0, 1 << 16), max_size=8))
@example(  # a block begun behind a body in pieces, completed in the read in which the next one begins
    [Request(padding=0, body=1), Request(padding=986, body=0), Request(padding=0, body=0)], [57, 134]
)
def test_no_block_over_the_bound_reaches_the_server_and_none_within_it_is_refused(
    requests: list[Request], cuts: list[int]
) -> None:
    stream = b"".join(request.wire() for request in requests)
    reads = reads_of(stream, cuts)
    with guarded() as (guard, inner, transport):
        for read in reads:
            guard.data_received(read)
        refused = transport.shut or transport.closed
        assert all(block <= LIMIT for block in inner.blocks), "a block over the bound reached the server whole"
        assert bytes(inner.received) == stream[: len(inner.received)], "the server was handed other bytes"
        oversized = [r.block() > LIMIT for r in requests]
        if any(oversized):
            assert refused, "a block over the bound was not refused"
            assert len(inner.blocks) <= oversized.index(True)  # nothing from the oversized one on was served
        elif not pipelined_behind_a_body_in_pieces(requests, reads):
            assert not refused, "blocks within the bound were refused"
            assert bytes(inner.received) == stream
            assert inner.blocks == [r.block() for r in requests]


def test_a_request_pipelined_behind_a_body_in_pieces_is_measured_by_its_reads() -> None:
    """The one case measured by read lengths: the whole read in which the block began counts."""
    first, second = Request(padding=10, body=2 * LIMIT), Request(padding=10, body=0)
    stream = first.wire() + second.wire()
    into_the_body = first.head_length() + 10
    with guarded() as (guard, inner, transport):
        guard.data_received(stream[:into_the_body])  # the head and the body's start, within the bound
        guard.data_received(stream[into_the_body:])  # the body's rest (over the bound) and the next request
        assert transport.shut or transport.closed  # refused, though the block is small: a pipelining client's cost
        assert inner.blocks == [first.block()]
    with guarded() as (guard, inner, transport):
        guard.data_received(stream[: len(first.wire()) - 10])
        guard.data_received(stream[len(first.wire()) - 10 :])  # a short read: the same measure is within
        assert not transport.shut
        assert not transport.closed
        assert inner.blocks == [first.block(), second.block()]


def test_a_chunked_requests_trailers_are_bounded_with_its_body() -> None:
    """Found by a review: the fields after a chunked body's last chunk reached the server with no bound
    (it keeps them, and joins a long value across reads: quadratic CPU), for as long as the body's time-out."""
    bounds = dataclasses.replace(BOUNDS, max_body_bytes=10_000)
    head = b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-Trailer: "
    loop = asyncio.new_event_loop()
    try:
        inner, transport = Recorder(), Transport()
        guard = GuardedProtocol(inner, bounds, ConnectionCounter(), loop)
        guard.connection_made(transport)
        guard.data_received(head)
        for _ in range(100):  # 400 KB of one trailer's value, 4 KB a read
            guard.data_received(b"t" * 4096)
            if transport.shut or transport.closed:
                break
        assert transport.shut or transport.closed  # (answered 413 by a server that says it has not answered)
        assert len(inner.received) <= len(head) + 10_000  # no more than the bound reached the server
    finally:
        loop.close()


def test_a_chunked_requests_trailers_are_not_counted_as_its_header_block() -> None:
    """In a read longer than the header bound (where fields are counted), trailers counted towards the
    block: a request was refused 431 in one read and served in two."""
    body = b"5\r\nhello\r\n0\r\nX-Trailer: " + b"t" * 1500 + b"\r\n\r\n"
    request = b"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    with guarded() as (guard, inner, transport):
        guard.data_received(request)  # one read, longer than the 1024-byte header bound
        assert not transport.shut
        assert not transport.closed
        assert bytes(inner.received) == request
