"""An upstream's answer over HTTP is bounded by the message size, whether it declares its length (read
whole) or streams it in chunks (read as it comes, given up on once past the bound)."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.transports.http_client import open_streamable_http
from gateway.transports.http_options import HttpOptions

pytestmark = pytest.mark.anyio
LIMIT = 4096


def _answer(request_id: object, size: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"text": "x" * size}}).encode()


async def _declared(request: Request) -> Response:
    asked = json.loads(await request.body())
    return Response(_answer(asked["id"], asked["params"]["size"]), media_type="application/json")


async def _chunked(request: Request) -> StreamingResponse:
    asked = json.loads(await request.body())
    body = _answer(asked["id"], asked["params"]["size"])

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    return StreamingResponse(pieces(), media_type="application/json")  # no Content-Length: chunked


@asynccontextmanager
async def _serving() -> AsyncIterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = Starlette(
        routes=[Route("/declared", _declared, methods=["POST"]), Route("/chunked", _chunked, methods=["POST"])]
    )
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="off"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(sockets=[sock]))
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
        finally:
            server.should_exit = True


@pytest.mark.parametrize("path", ["/declared", "/chunked"])
async def test_an_answer_within_the_bound_is_read_and_one_past_it_is_refused(path: str) -> None:
    async with (
        _serving() as base,
        open_streamable_http(base + path, HttpOptions(proxy="none"), max_message_bytes=LIMIT) as stream,
    ):
        for request_id, size in ((1, LIMIT // 2), (2, LIMIT * 4)):
            frame = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "x", "params": {"size": size}}).encode()
            with anyio.fail_after(10):
                answer = json.loads(await stream.exchange(frame, request_id, "x", {"size": size}) or b"null")
            if size < LIMIT:
                assert answer["result"]["text"] == "x" * size
            else:
                assert answer["id"] == request_id
                assert "over the message size limit (4096 bytes)" in answer["error"]["message"]
