"""The lean upstream HTTP/1.1 client against a real socket server speaking h11."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.lowlevel
import h11
import pytest
from anyio.abc import SocketStream

from gateway.transports.http1 import Http1Error, Http1Pool

pytestmark = pytest.mark.anyio


@pytest.fixture(
    params=[("asyncio", {"use_uvloop": False}), ("asyncio", {"use_uvloop": True})], ids=["asyncio", "uvloop"]
)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, bool]]:
    """Both event loops the gateway runs on: their transports differ (uvloop's are no asyncio subclasses)."""
    return request.param  # type: ignore[no-any-return]


class Server:
    """Answers every POST with its body echoed; ``chunks`` > 0 answers in that many chunked pieces;
    ``close_after_each`` closes the connection after each answer (as a server ending keep-alive does)."""

    def __init__(self) -> None:
        self.accepted = 0
        self.closed = 0
        self.chunks = 0
        self.close_after_each = False

    async def handle(self, stream: SocketStream) -> None:
        self.accepted += 1
        try:
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, ConnectionError):
                await self._serve(stream)
        finally:
            self.closed += 1

    async def _serve(self, stream: SocketStream) -> None:
        connection = h11.Connection(h11.SERVER)
        async with stream:
            while True:
                body = b""
                while True:
                    event = connection.next_event()
                    if event is h11.NEED_DATA:
                        try:
                            connection.receive_data(await stream.receive())
                        except anyio.EndOfStream:
                            connection.receive_data(b"")
                        continue
                    if isinstance(event, h11.ConnectionClosed):
                        return
                    if isinstance(event, h11.Data):
                        body += event.data
                    if isinstance(event, h11.EndOfMessage):
                        break
                if self.chunks:
                    head = [("transfer-encoding", "chunked")]
                    await stream.send(connection.send(h11.Response(status_code=200, headers=head)))
                    for i in range(self.chunks):
                        await stream.send(connection.send(h11.Data(data=b"%d;" % i)))
                else:
                    head = [("content-length", str(len(body)))]
                    await stream.send(connection.send(h11.Response(status_code=200, headers=head)))
                    await stream.send(connection.send(h11.Data(data=body)))
                await stream.send(connection.send(h11.EndOfMessage()))
                if self.close_after_each:
                    return
                connection.start_next_cycle()


@asynccontextmanager
async def serving() -> AsyncIterator[tuple[Server, str]]:
    server = Server()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio, not Django
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, server.handle)
        yield server, f"http://127.0.0.1:{port}/mcp"
        tg.cancel_scope.cancel()


async def post(pool: Http1Pool, body: bytes) -> tuple[int, bytes]:
    async with pool.post("/mcp", [(b"content-type", b"application/json")], body) as answer:
        return answer.status, b"".join([chunk async for chunk in answer.body])


async def test_requests_reuse_one_keep_alive_connection() -> None:
    async with serving() as (server, url):
        pool = Http1Pool(url, headers=[(b"authorization", b"Bearer x")], connect_timeout_s=5)
        assert await post(pool, b"one") == (200, b"one")
        assert pool.idle_count == 1
        assert await post(pool, b"two") == (200, b"two")
        assert server.accepted == 1
        await pool.aclose()


async def test_concurrent_requests_get_connections_of_their_own() -> None:
    async with serving() as (_, url):
        pool = Http1Pool(url, headers=[], connect_timeout_s=5)
        answers: list[tuple[int, bytes]] = []

        async def one(i: int) -> None:
            answers.append(await post(pool, b"%d" % i))

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(one, i)
        assert sorted(answers) == sorted((200, b"%d" % i) for i in range(8))
        await pool.aclose()


async def test_a_streamed_answer_arrives_in_pieces() -> None:
    async with serving() as (server, url):
        server.chunks = 3
        pool = Http1Pool(url, headers=[], connect_timeout_s=5)
        async with pool.post("/mcp", [], b"x") as answer:
            pieces = [chunk async for chunk in answer.body]
        assert pieces == [b"0;", b"1;", b"2;"]
        await pool.aclose()


async def test_an_answer_left_unread_closes_its_connection() -> None:
    async with serving() as (server, url):
        server.chunks = 3
        pool = Http1Pool(url, headers=[], connect_timeout_s=5)
        async with pool.post("/mcp", [], b"x") as answer:
            assert answer.status == 200  # the body is not read: the connection is mid-response
        server.chunks = 0
        assert await post(pool, b"next") == (200, b"next")
        assert server.accepted == 2
        await pool.aclose()


async def test_a_connection_the_server_closed_is_not_reused() -> None:
    async with serving() as (server, url):
        server.close_after_each = True
        pool = Http1Pool(url, headers=[], connect_timeout_s=5)
        assert await post(pool, b"one") == (200, b"one")
        with anyio.fail_after(5):
            while server.closed < 1:
                await anyio.lowlevel.checkpoint()
        assert await post(pool, b"two") == (200, b"two")  # a new connection, not a broken one
        assert server.accepted == 2
        await pool.aclose()


async def test_a_connection_closed_as_it_is_reused_is_retried_once_on_a_new_one() -> None:
    async with serving() as (server, url):
        server.close_after_each = True  # and the pool does not ask (idle for less than a second)
        pool = Http1Pool(url, headers=[], connect_timeout_s=5)
        for body in (b"one", b"two", b"three"):
            assert await post(pool, body) == (200, body)
        assert server.accepted == 3
        await pool.aclose()


async def test_an_unreachable_server_is_an_http1_error() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio, not Django
    await listener.aclose()
    pool = Http1Pool(f"http://127.0.0.1:{port}/mcp", headers=[], connect_timeout_s=5)
    with pytest.raises(Http1Error, match="cannot connect"):
        await post(pool, b"x")


@asynccontextmanager
async def answering(*replies: bytes) -> AsyncIterator[tuple[list[int], str]]:
    """A server that answers each connection's first request with the next of ``replies``, byte for
    byte, then closes it; the list counts connections."""
    accepted: list[int] = []

    async def handle(stream: SocketStream) -> None:
        index = len(accepted)
        accepted.append(index)
        async with stream:
            with suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                await stream.receive()
                await stream.send(replies[index])

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio, not Django
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        yield accepted, f"http://127.0.0.1:{port}/mcp"
        tg.cancel_scope.cancel()


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\nok",  # the body runs until the server closes
        b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok",
    ],
)
async def test_a_connection_the_answer_ends_is_not_kept(reply: bytes) -> None:
    async with answering(reply, reply) as (accepted, url):
        pool = Http1Pool(url, headers=[], connect_timeout_s=5)
        assert await post(pool, b"x") == (200, b"ok")
        assert pool.idle_count == 0  # nothing to reuse: the server ends the connection with its answer
        assert await post(pool, b"x") == (200, b"ok")
        assert len(accepted) == 2
        await pool.aclose()


async def test_an_interim_answer_is_skipped_for_the_final_one() -> None:
    reply = b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
    async with answering(reply) as (_, url):
        pool = Http1Pool(url, headers=[], connect_timeout_s=5)
        async with pool.post("/mcp", [], b"x") as answer:
            assert (answer.status, answer.header(b"link")) == (200, None)
            assert b"".join([chunk async for chunk in answer.body]) == b"ok"
        await pool.aclose()


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort", "broke off"),  # cut short
        (b"SSH-2.0-OpenSSH_9.6\r\n", "HttpParserError"),  # not HTTP at all
    ],
)
async def test_a_broken_answer_is_an_http1_error(reply: bytes, reason: str) -> None:
    async with answering(reply) as (_, url):
        pool = Http1Pool(url, headers=[], connect_timeout_s=5)
        with pytest.raises(Http1Error, match=reason):
            await post(pool, b"x")
        await pool.aclose()


@pytest.mark.parametrize("value", [b"a\r\nx-injected: 1", b"a\nb", b"a\0b"])
async def test_a_header_that_would_split_the_request_is_refused(value: bytes) -> None:
    pool = Http1Pool("http://127.0.0.1:9/mcp", headers=[], connect_timeout_s=5)
    with pytest.raises(Http1Error, match="malformed header"):
        await post_with(pool, [(b"mcp-name", value)])


async def test_a_target_that_would_split_the_request_is_refused() -> None:
    pool = Http1Pool("http://127.0.0.1:9/mcp", headers=[], connect_timeout_s=5)
    with pytest.raises(Http1Error, match="malformed request target"):
        await post_with(pool, [], target="/mcp HTTP/1.1\r\nx-injected: 1\r\n")


async def post_with(pool: Http1Pool, headers: list[tuple[bytes, bytes]], target: str = "/mcp") -> None:
    async with pool.post(target, headers, b"x"):
        pass  # pragma: no cover - refused before anything is sent


async def test_a_large_answer_arrives_whole_through_paused_and_resumed_reading() -> None:
    body = bytes(range(256)) * 8192  # 2 MiB: reading pauses at 256 KiB unread and resumes as it is taken
    reply = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    async with answering(reply) as (_, url):
        pool = Http1Pool(url, headers=[], connect_timeout_s=5)
        async with pool.post("/mcp", [], b"x") as answer:
            received = bytearray()
            async for chunk in answer.body:
                received += chunk
                await anyio.lowlevel.checkpoint()  # a consumer that lets the loop run between chunks
        assert bytes(received) == body
        await pool.aclose()


async def test_a_connection_the_server_talks_on_out_of_turn_is_not_reused() -> None:
    reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
    stale = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nstale"
    async with answering(reply + stale, reply) as (accepted, url):  # the stray answer in the same breath
        pool = Http1Pool(url, headers=[], connect_timeout_s=5)
        assert await post(pool, b"x") == (200, b"ok")
        assert pool.idle_count == 0
        assert await post(pool, b"x") == (200, b"ok")
        assert len(accepted) == 2
        await pool.aclose()


async def test_a_pooled_connection_the_server_talks_on_is_dropped() -> None:
    pooled, dropped = anyio.Event(), anyio.Event()
    reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
    accepted: list[SocketStream] = []

    async def handle(stream: SocketStream) -> None:
        accepted.append(stream)
        async with stream:
            with suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                await stream.receive()
                await stream.send(reply)
                if len(accepted) > 1:
                    return
                await pooled.wait()  # the client has put the connection back: now talk out of turn
                await stream.send(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nstale")
                await stream.receive()  # until the client hangs up
            dropped.set()

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio, not Django
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        pool = Http1Pool(f"http://127.0.0.1:{port}/mcp", headers=[], connect_timeout_s=5)
        assert await post(pool, b"x") == (200, b"ok")
        assert pool.idle_count == 1
        pooled.set()
        with anyio.fail_after(5):
            await dropped.wait()  # the client hung up on a server that spoke out of turn
        assert await post(pool, b"x") == (200, b"ok")
        assert len(accepted) == 2
        await pool.aclose()
        tg.cancel_scope.cancel()
