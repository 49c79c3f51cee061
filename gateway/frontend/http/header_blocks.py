"""The exact size of each request's header block, for the connection guard's bound
(``connection_guard.py``): parsed by an llhttp parser of its own (httptools, the parser uvicorn uses)
that hands every field over. The guard's own parser asks for none, since llhttp handing fields to Python
costs more than the rest of its parse (6% of a relayed request's CPU).

A read that begins between requests and is no longer than the bound cannot hold a block over it, so
most reads need no sizes. The guard makes one of these where a read could: a read longer than the
bound, or a block going on into the next read (that read is parsed again, from the request's start);
it feeds it every read from then on, as its own parser, until a read ends between requests.

Left to the guard: a request that begins in a read which began inside another's body (pipelined behind
a body that came in pieces), where no parser knows the block's start. Its block is measured by the
lengths of the reads it spans, whole: never less than it is, and more only for such a pipelining client.
"""

from __future__ import annotations

import httptools


class HeaderBlocks:
    """Fed a connection's bytes from a request's start: the size of the block being read and the
    largest in the latest read."""

    __slots__ = ("_in_block", "_parser", "current", "largest")

    def __init__(self) -> None:
        self.current = 0  # the block being read, or the last one
        self.largest = 0  # the largest block in the latest read (the one going on included)
        self._in_block = False  # (a chunked request's trailers are fields too: the guard bounds them apart)
        self._parser: httptools.HttpRequestParser | None = httptools.HttpRequestParser(self)

    def feed(self, data: bytes) -> None:
        self.largest = self.current
        if self._parser is None:
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # resumed after the request, as the guard's own parser is
        except httptools.HttpParserError:
            self._parser = None  # the guard's own parser stops at the same byte and stops watching

    # ---- llhttp callbacks ---------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.current = 0
        self._in_block = True

    def on_url(self, url: bytes) -> None:
        self._grow(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._in_block:
            self._grow(len(name) + len(value) + 4)  # ": " and CRLF

    def on_headers_complete(self) -> None:
        self._in_block = False

    def _grow(self, size: int) -> None:
        self.current += size
        if self.current > self.largest:
            self.largest = self.current
