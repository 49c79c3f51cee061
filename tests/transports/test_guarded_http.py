"""uvicorn's own protocol behind the connection guard (composed, not subclassed) still speaks HTTP/1.1:
kept-alive pipelined requests, streamed answers, and answers before a close."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable

import anyio
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.frontend.http.connection_guard import ConnectionBounds, guarded

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
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    bounds = ConnectionBounds(
        max_connections=10,
        max_connections_per_client=10,
        max_header_bytes=65536,
        header_timeout_s=10,
        body_timeout_s=10,
    )
    config = uvicorn.Config(app, http=guarded(HttpToolsProtocol, bounds), log_config=None, lifespan="off")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(sockets=[sock]))
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
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
        server.should_exit = True
