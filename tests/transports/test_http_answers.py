"""An upstream's answer over HTTP is bounded by the message size, whether it declares its length (read
whole) or streams it in chunks (read as it comes, given up on once past the bound)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.transports.http_client import open_streamable_http
from gateway.transports.http_options import HttpOptions
from tests.transports.uvicorn_server import serving

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
    routes = [Route("/declared", _declared, methods=["POST"]), Route("/chunked", _chunked, methods=["POST"])]
    async with serving(Starlette(routes=routes)) as port:
        yield f"http://127.0.0.1:{port}"


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
