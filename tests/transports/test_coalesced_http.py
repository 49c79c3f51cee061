"""The front end's uvicorn protocol: a response's writes leave as one, and HTTP still works over it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.coalesced_http import CoalescingHttpToolsProtocol, CoalescingTransport

pytestmark = pytest.mark.anyio


@pytest.fixture(
    params=[("asyncio", {"use_uvloop": False}), ("asyncio", {"use_uvloop": True})], ids=["asyncio", "uvloop"]
)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, bool]]:
    return request.param  # type: ignore[no-any-return]


class RecordingTransport(asyncio.Transport):
    """Records each write the wrapped transport would have made as one system call."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "written after close"
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


async def test_writes_in_one_iteration_leave_as_one_after_it() -> None:
    inner = RecordingTransport()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())
    transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    transport.write(memoryview(b"{}"))
    assert inner.writes == []  # held until the iteration ends
    await asyncio.sleep(0)
    assert inner.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]


async def test_writes_in_different_iterations_are_not_held_back_for_each_other() -> None:
    inner = RecordingTransport()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())
    transport.write(b"event 1")
    await asyncio.sleep(0)
    transport.write(b"event 2")
    await asyncio.sleep(0)
    assert inner.writes == [b"event 1", b"event 2"]


async def test_close_sends_what_was_written_first() -> None:
    inner = RecordingTransport()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())
    transport.writelines([b"last ", b"words"])
    transport.close()
    assert inner.writes == [b"last words"]
    assert inner.closed
    await asyncio.sleep(0)  # the scheduled flush finds nothing left and writes nothing
    assert inner.writes == [b"last words"]


async def test_nothing_is_written_to_a_transport_closed_under_it() -> None:
    inner = RecordingTransport()
    transport = CoalescingTransport(inner, asyncio.get_running_loop())
    transport.write(b"too late")
    inner.close()  # e.g. the connection was aborted
    await asyncio.sleep(0)
    assert inner.writes == []
    assert transport.is_closing()  # everything else is the wrapped transport's
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)


# ---- a real uvicorn server on the protocol -----------------------------------------------------------


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


async def test_uvicorn_on_the_protocol_serves_keep_alive_streamed_and_closing_answers() -> None:
    app = Starlette(routes=[Route("/plain", _plain, methods=["POST"]), Route("/streamed", _streamed)])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, http=CoalescingHttpToolsProtocol, log_config=None, lifespan="off")
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
