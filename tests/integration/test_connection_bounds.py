"""Connections are bounded before anything is authenticated: silent and slow-header connections are cut
at the header time-out, a slow body at the body time-out, an oversized header block is refused once it
passes the bound (not buffered whole), and one client address cannot take every connection. A client at
another address is served throughout. Clients use distinct loopback addresses (127.0.0.x) as sources."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from anyio.abc import SocketStream

from tests.integration.helpers import HTTP_HEADERS, INITIALIZE, demo_upstream, running_gateway, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HEADERS = HTTP_HEADERS
INIT = INITIALIZE


@asynccontextmanager
async def bounded_gateway(tmp_path: Path, **bounds: object) -> AsyncIterator[tuple[str, int, str]]:
    server = {"transport": "http", "port": 0, **bounds}
    config = write_config(tmp_path / "c.toml", [demo_upstream("writing", "writing")], server=server)
    async with running_gateway(config) as gateway:
        parts = urlsplit(gateway.url)
        assert parts.hostname is not None
        assert parts.port is not None
        yield parts.hostname, parts.port, gateway.url


async def connect_from(source: str, host: str, port: int) -> SocketStream:
    return await anyio.connect_tcp(host, port, local_host=source)


async def read_until_closed(stream: SocketStream, timeout: float = 20) -> bytes:
    """Everything the server sends until it closes (or resets) the connection."""
    received = b""
    with anyio.fail_after(timeout):
        while True:
            try:
                received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionError):
                return received


async def served(url: str) -> bool:
    async with httpx.AsyncClient(timeout=20) as http:
        response = await http.post(f"{url}/mcp", json=INIT, headers=HEADERS)
        return response.status_code == 200 and "mcp-session-id" in response.headers


async def test_silent_and_slow_header_connections_are_cut_at_the_header_timeout(tmp_path: Path) -> None:
    async with bounded_gateway(tmp_path, header_timeout_s=1) as (host, port, url), AsyncExitStack() as stack:
        silent = [await stack.enter_async_context(await connect_from("127.0.0.2", host, port)) for _ in range(10)]
        slow = [await stack.enter_async_context(await connect_from("127.0.0.2", host, port)) for _ in range(5)]
        for stream in slow:
            await stream.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")  # and never the rest
        assert await served(url)  # another address is served meanwhile
        answers = []
        async with anyio.create_task_group() as tg:
            for stream in silent + slow:

                async def collect(stream: SocketStream = stream) -> None:
                    answers.append(await read_until_closed(stream))

                tg.start_soon(collect)
        assert len(answers) == 15
        assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers), answers[:2]
        assert b'"code": -32600' in answers[0]


async def test_a_body_slower_than_the_body_timeout_is_cut(tmp_path: Path) -> None:
    """Cut at the body's time-out, though the connection's timer was set for its header block's, later
    (one timer serves a connection's clocks: it is moved earlier for a shorter one)."""
    bounds = {"body_timeout_s": 1, "header_timeout_s": 120}
    async with bounded_gateway(tmp_path, **bounds) as (host, port, url), AsyncExitStack() as stack:
        stream = await stack.enter_async_context(await connect_from("127.0.0.2", host, port))
        split = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        split += b"Accept: application/json, text/event-stream\r\nContent-Length: "
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
        await stream.send(split + str(len(body)).encode() + b"\r\n\r\n")
        await stream.send(body)  # a body that comes in its own read, in time: its clock stops
        first = b""
        while b"\r\n\r\n" not in first:
            first += await stream.receive()
        assert not first.startswith(b"HTTP/1.1 408 ")
        await stream.send(split + b'1000\r\n\r\n{"jsonrpc":')
        answer = await read_until_closed(stream, timeout=60)  # used to wait for the rest for ever
        assert b"HTTP/1.1 408 " in answer
        assert await served(url)


async def test_an_oversized_header_block_is_refused_when_it_passes_the_bound(tmp_path: Path) -> None:
    async with bounded_gateway(tmp_path, max_header_bytes=16384) as (host, port, url):
        async with await connect_from("127.0.0.2", host, port) as stream:
            await stream.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ")
            with anyio.move_on_after(20):  # the server stops reading: a blocked send is the sign
                for _ in range(64):  # up to 64 MiB, one MiB a send: a header block used to be read whole
                    try:
                        await stream.send(b"a" * (1 << 20))
                    except (anyio.BrokenResourceError, ConnectionError):
                        break
            answer = await read_until_closed(stream)
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        assert b"exceeds 16384 bytes" in answer
        assert await served(url)


@pytest.mark.parametrize("size", [100_000, 300_000])
async def test_a_whole_oversized_header_block_in_one_write_is_refused(tmp_path: Path, size: int) -> None:
    """The bound holds however the block is split into reads: one write of a complete request whose
    Authorization header is over it used to be read in one piece and served."""
    async with bounded_gateway(tmp_path) as (host, port, url):
        async with await connect_from("127.0.0.2", host, port) as stream:
            body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
            await stream.send(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nAuthorization: Bearer " + b"a" * size + b"\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            answer = await read_until_closed(stream)
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        assert b"exceeds 65536 bytes" in answer
        assert await served(url)


async def test_an_oversized_block_with_a_small_request_behind_it_in_one_write_is_refused(tmp_path: Path) -> None:
    """A block over the bound followed, in the same write, by a small request: the small one's block was
    measured in place of the large one's, and the large one was served."""
    async with bounded_gateway(tmp_path) as (host, port, url):
        async with await connect_from("127.0.0.2", host, port) as stream:
            body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
            head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            head += b"Accept: application/json, text/event-stream\r\n"
            tail = b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            oversized = head + b"Authorization: Bearer " + b"a" * 100_000 + b"\r\n" + tail
            await stream.send(oversized + head + b"Connection: close\r\n" + tail)
            answer = await read_until_closed(stream)
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        assert answer.count(b"HTTP/1.1 ") == 1
        assert await served(url)


async def test_an_upgrade_request_does_not_end_the_bounds_on_its_connection(tmp_path: Path) -> None:
    """Found by a review: a request with an Upgrade header (``curl --http2`` sends ``Upgrade: h2c``) made
    the guard stop watching the connection, which the server (no WebSockets) goes on serving in HTTP:
    an oversized header block or a stalled one then reached it unbounded."""
    async with bounded_gateway(tmp_path, max_header_bytes=16384) as (host, port, url):
        async with await connect_from("127.0.0.2", host, port) as stream:
            await stream.send(
                b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nAccept: text/event-stream\r\n\r\n"
            )
            first = b""
            while b"\r\n\r\n" not in first:
                first += await stream.receive()
            assert first.startswith(b"HTTP/1.1 4"), first[:100]  # answered in HTTP (no session asked for)
            body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
            await stream.send(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer " + b"a" * 100_000 + b"\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            answer = await read_until_closed(stream)
        assert b"HTTP/1.1 431 " in answer, answer[-300:]
        assert await served(url)


async def test_a_chunked_request_with_endless_trailers_is_cut(tmp_path: Path) -> None:
    """Found by a review: the fields after a chunked body's last chunk were not bounded at all (the
    server keeps them), only timed by the body's time-out."""
    async with bounded_gateway(tmp_path, body_timeout_s=120) as (host, port, url):
        async with await connect_from("127.0.0.2", host, port) as stream:
            await stream.send(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"2\r\n{}\r\n0\r\nX-Trailer: "
            )
            with anyio.move_on_after(60):
                for _ in range(24):  # 24 MiB of one trailer's value: the bound is 8 MiB (twice max_message_bytes)
                    try:  # (past it, what still comes is read and dropped, as for any early answer)
                        await stream.send(b"t" * (1 << 20))
                    except (anyio.BrokenResourceError, ConnectionError):
                        break
            answer = await read_until_closed(stream)  # it waited for the body's time-out, the trailer kept
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert await served(url)


async def test_pipelined_requests_under_the_bound_are_each_served(tmp_path: Path) -> None:
    """Two requests each under the bound, in one write: the bytes of the first were counted against the
    second's header block (reads straddle them), and the connection was reset with no answer."""
    async with bounded_gateway(tmp_path) as (host, port, _):
        async with await connect_from("127.0.0.2", host, port) as stream:
            body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
            request = (
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nX-Padding: " + b"p" * 64000 + b"\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            await stream.send(request + request[: -len(body) - 4] + b"\r\nConnection: close\r\n\r\n" + body)
            answers = await read_until_closed(stream)
        assert answers.count(b"HTTP/1.1 ") == 2, answers[:300]
        assert b"431" not in answers


async def test_one_address_cannot_take_every_connection(tmp_path: Path) -> None:
    bounds = {"max_connections_per_client": 20, "max_connections": 45, "header_timeout_s": 60}
    async with bounded_gateway(tmp_path, **bounds) as (host, port, url), AsyncExitStack() as stack:
        held = [await stack.enter_async_context(await connect_from("127.0.0.3", host, port)) for _ in range(20)]
        extra = await stack.enter_async_context(await connect_from("127.0.0.3", host, port))
        refused = await read_until_closed(extra)
        assert refused.startswith(b"HTTP/1.1 503 ")
        assert b"20 connections are open from this address" in refused
        assert await served(url)  # 127.0.0.1 is another address
        held += [await stack.enter_async_context(await connect_from("127.0.0.4", host, port)) for _ in range(20)]
        # 40 held plus the client's: the overall bound is near; past it every address is refused
        more = [await stack.enter_async_context(await connect_from("127.0.0.5", host, port)) for _ in range(10)]
        overall = await read_until_closed(more[-1])
        assert overall.startswith(b"HTTP/1.1 503 ")
        assert b"the gateway has 45 connections open" in overall
        for stream in held[:10]:
            await stream.aclose()  # room again once connections close
        with anyio.fail_after(20):
            while not await served(url):
                await anyio.sleep(0.05)
