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


def _deep_answer(request_id: object) -> bytes:
    depth = 5000  # past what the standard library reads (its recursion ends near 1,000)
    head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":{"d":'
    return head + b'{"a":' * depth + b"1" + b"}" * depth + b"}}"


async def _deep(request: Request) -> Response:
    asked = json.loads(await request.body())
    if asked["params"]["sse"]:
        return Response(b"event: message\ndata: " + _deep_answer(asked["id"]) + b"\n\n", media_type="text/event-stream")
    return Response(_deep_answer(asked["id"]), media_type="application/json")


@pytest.mark.parametrize("sse", [False, True])
async def test_an_answer_nested_past_any_parsers_depth_is_handed_up_not_raised(sse: bool) -> None:
    """The transport's own looks at an answer (its id, whether it is an error) ended in a RecursionError:
    the request failed as an internal error with a traceback. It is handed up; decoding refuses it."""
    async with (
        serving(Starlette(routes=[Route("/deep", _deep, methods=["POST"])])) as port,
        open_streamable_http(
            f"http://127.0.0.1:{port}/deep", HttpOptions(proxy="none"), max_message_bytes=1 << 20
        ) as stream,
    ):
        frame = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "x", "params": {"sse": sse}}).encode()
        with anyio.fail_after(10):
            answer = await stream.exchange(frame, 3, "x", {"sse": sse})
            if answer is None:  # an event stream's answer arrives as any frame of the stream does
                answer = await stream.receive()
        assert answer.startswith(b'{"jsonrpc":"2.0","id":3,"result":{"d":{"a":'), answer[:200]
