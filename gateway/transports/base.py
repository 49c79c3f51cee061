"""The one seam between I/O and protocol: a stream of whole frames (one JSON-RPC message each)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024


EDGE_BYTES = 256
"""How much of an oversize frame's start and end is kept: enough to find its id, which a JSON-RPC
message puts first (the Python SDK's) or last (the TypeScript SDK's)."""


class MessageTooLarge(Exception):
    """A frame exceeded the size bound; it was skipped whole, and the stream is still usable. ``head`` and
    ``tail``: its first and last ``EDGE_BYTES``, where its id is (so that its request can be answered)."""

    def __init__(self, limit: int, head: bytes = b"", tail: bytes = b"") -> None:
        super().__init__(f"message larger than {limit} bytes")
        self.limit = limit
        self.head = head
        self.tail = tail


class MessageStream(Protocol):
    async def send(self, frame: bytes) -> None: ...

    async def receive(self) -> bytes:
        """Next frame; raises anyio.EndOfStream when the peer has gone, MessageTooLarge for an oversize one."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class ExchangingStream(MessageStream, Protocol):
    """A stream that can answer a request in the same call that sends it (HTTP's JSON answers)."""

    async def exchange(
        self, frame: bytes, request_id: object, method: str, params: dict[str, Any] | None
    ) -> bytes | None:
        """The answer to the request ``frame`` encodes (its id, method and params given, so they need not
        be parsed back), or None when it arrives through ``receive`` (after what precedes it)."""
        ...


class NewlineFramedStream:
    """Newline-delimited frames over a byte stream pair (the MCP stdio framing).

    Frames are bounded: an oversize one is discarded up to its newline and reported, so one bad
    message cannot grow memory or desynchronise the stream.
    """

    def __init__(
        self,
        receive_stream: ByteReceiveStream,
        send_stream: ByteSendStream,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self._receive_stream = receive_stream
        self._send_stream = send_stream
        self._max = max_message_bytes
        self._buffer = bytearray()
        self._send_lock = anyio.Lock(fast_acquire=True)  # uncontended (the usual case): no extra checkpoint
        self._skipping = False
        self._skipped_head = self._skipped_tail = b""  # the edges of the oversize frame being skipped

    async def send(self, frame: bytes) -> None:
        async with self._send_lock:
            await self._send_stream.send(frame + b"\n")

    async def receive(self) -> bytes:
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                frame = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                if self._skipping:
                    self._skipping = False
                    tail = (self._skipped_tail + frame.rstrip(b"\r"))[-EDGE_BYTES:]
                    raise MessageTooLarge(self._max, self._skipped_head, tail)
                frame = frame.rstrip(b"\r")
                if len(frame) > self._max:
                    raise MessageTooLarge(self._max, frame[:EDGE_BYTES], frame[-EDGE_BYTES:])
                if frame.strip():
                    return frame
                continue
            if len(self._buffer) > self._max:
                if not self._skipping:
                    self._skipped_head = bytes(self._buffer[:EDGE_BYTES])
                self._skipped_tail = bytes(self._buffer[-EDGE_BYTES:])
                self._skipping = True
                self._buffer.clear()
            try:
                chunk = await self._receive_stream.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise anyio.EndOfStream from None
            self._buffer += chunk

    async def aclose(self) -> None:
        await self._send_stream.aclose()
        await self._receive_stream.aclose()


HTTP_STATUS_DATA_KEY = "httpStatus"
"""Where the error frame standing for an HTTP failure keeps its status (the connector tells these from the
server's own JSON-RPC errors: the server is down, not refusing)."""
