"""uvicorn's own protocol behind the connection guard (composed, not subclassed) still speaks HTTP/1.1:
kept-alive pipelined requests, streamed answers, and answers before a close; an answer given before
the body has arrived is read by a client still sending it, and the lingering close that allows it
ends past its bound. On both event loops."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.frontend.http import connection_guard
from gateway.frontend.http.connection_bounds import ConnectionBounds
from gateway.frontend.http.connection_guard import guarded
from tests.transports.uvicorn_server import serving

pytestmark = pytest.mark.anyio


@pytest.fixture(
    params=[("asyncio", {"use_uvloop": False}), ("asyncio", {"use_uvloop": True})], ids=["asyncio", "uvloop"]
)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, bool]]:
    return request.param  # type: ignore[no-any-return]


# ---- a real uvicorn server behind the guard -----------------------------------------------------------


async def _plain(request: Request) -> Response:
    return Response(await request.body(), media_type="application/octet-stream")


async def _streamed(request: Request) -> StreamingResponse:
    async def pieces() -> AsyncIterator[bytes]:
        for piece in (b"one", b"two", b"three"):
            yield piece
            await anyio.sleep(0.01)  # pieces in different iterations, each sent when written

    return StreamingResponse(pieces(), media_type="text/plain")


async def _refused_unread(request: Request) -> Response:
    return Response(b"too large", status_code=413, headers={"Connection": "close"})


BOUNDS = ConnectionBounds(
    max_connections=10,
    max_connections_per_client=10,
    max_header_bytes=65536,
    header_timeout_s=10,
    body_timeout_s=10,
)


def _serving(app: Starlette, bounds: ConnectionBounds = BOUNDS) -> AbstractAsyncContextManager[int]:
    """uvicorn behind the guard on a free loopback port, serving ``app`` until the block ends."""
    return serving(app, http=guarded(HttpToolsProtocol, bounds))


async def _send_until_refused(stream: anyio.abc.SocketStream, total: int) -> int:
    """How much of ``total`` bytes was sent before the server stopped taking them."""
    sent = 0
    with anyio.move_on_after(20):
        while sent < total:
            try:
                await stream.send(b"x" * 65536)
            except (anyio.BrokenResourceError, ConnectionError):
                break
            sent += 65536
    return sent


async def test_an_answer_before_the_body_is_read_by_a_client_still_sending_it() -> None:
    async with _serving(Starlette(routes=[Route("/", _refused_unread, methods=["POST"])])) as port:
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(b"POST / HTTP/1.1\r\nhost: t\r\ncontent-length: 16777216\r\n\r\n")
            assert await _send_until_refused(stream, 16 << 20) == 16 << 20  # all read (and dropped)
            answer = await _exchange_rest(stream)
        assert answer.startswith(b"HTTP/1.1 413 ")
        assert answer.endswith(b"too large")


async def test_a_lingering_close_ends_past_its_byte_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection_guard, "LINGER_MAX_BYTES", 1 << 20)
    app = Starlette(routes=[Route("/", _refused_unread, methods=["POST"])])
    async with _serving(app) as port, await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(b"POST / HTTP/1.1\r\nhost: t\r\ncontent-length: 268435456\r\n\r\n")
        assert await _send_until_refused(stream, 256 << 20) < 256 << 20  # cut, not read for ever


async def _exchange_rest(stream: anyio.abc.SocketStream) -> bytes:
    received = b""
    with anyio.fail_after(10):
        while True:
            try:
                received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                return received


async def _exchange(port: int, raw_request: bytes, *, until: Callable[[bytes], bool]) -> bytes:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(raw_request)
        received = b""
        with anyio.fail_after(10):
            while not until(received):
                try:
                    received += await stream.receive()
                except anyio.EndOfStream:
                    break
        return received


async def test_uvicorn_behind_the_guard_serves_keep_alive_streamed_and_closing_answers() -> None:
    app = Starlette(routes=[Route("/plain", _plain, methods=["POST"]), Route("/streamed", _streamed)])
    bounds = ConnectionBounds(
        max_connections=10,
        max_connections_per_client=10,
        max_header_bytes=65536,
        header_timeout_s=10,
        body_timeout_s=10,
    )
    async with _serving(app, bounds) as port:
        post = b"POST /plain HTTP/1.1\r\nhost: t\r\ncontent-length: 5\r\n\r\nhello"
        two = await _exchange(port, post + post, until=lambda got: got.count(b"hello") == 2)  # kept alive
        assert two.count(b"HTTP/1.1 200 OK") == 2
        assert two.endswith(b"\r\n\r\nhello")

        streamed = await _exchange(
            port, b"GET /streamed HTTP/1.1\r\nhost: t\r\n\r\n", until=lambda got: got.endswith(b"0\r\n\r\n")
        )
        assert b"transfer-encoding: chunked" in streamed
        assert streamed.endswith(b"3\r\none\r\n3\r\ntwo\r\n5\r\nthree\r\n0\r\n\r\n")

        closing = post.replace(b"host: t\r\n", b"host: t\r\nconnection: close\r\n")
        closed = await _exchange(port, closing, until=lambda got: False)  # read until the server closes
        assert closed.endswith(b"\r\n\r\nhello")  # the answer was flushed before the close
