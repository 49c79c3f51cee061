"""An answer given before the request has all arrived reaches a client that is still sending it, as
httpx and aiohttp are (httpx reads nothing before its request is sent): a header block too large (431)
on a kept-alive connection too, a body too large (413) also where the connection then closes, a body
too slow (408). Before, the gateway closed with the client's bytes unread, the kernel reset the
connection, and the client saw it drop with no answer. The lingering close that lets them read it is
itself bounded, and counts against the connection bounds meanwhile."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
import anyio
import httpx
import pytest

from tests.integration.helpers import HTTP_HEADERS, INITIALIZE, RunningGateway, demo_upstream, running_gateway
from tests.integration.helpers import write_config as _write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HUGE_NAME = {"Mcp-Name": "a" * 200_000}
BIG_BODY = b"[" + b" " * (32 << 20) + b"]"  # 32 MiB: eight times the message bound


def config(tmp_path: Path, **server: object) -> Path:
    return _write_config(
        tmp_path / "c.toml", [demo_upstream("writing", "writing")], server={"transport": "http", "port": 0, **server}
    )


def then_rest(
    first: bytes, after: Callable[[], Awaitable[object]], rest: bytes = b""
) -> Callable[[], AsyncIterator[bytes]]:
    """A body sent in two parts: ``first``, then ``rest`` once ``after()`` (awaited) has returned."""

    async def body() -> AsyncIterator[bytes]:
        yield first
        await after()
        if rest:
            yield rest

    return body


async def test_a_header_block_too_large_is_answered_431_on_a_new_and_a_kept_alive_connection(tmp_path: Path) -> None:
    async with running_gateway(config(tmp_path)) as gateway:
        url = f"{gateway.url}/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            first = await http.post(url, headers={**HTTP_HEADERS, **HUGE_NAME}, json=INITIALIZE)
            assert first.status_code == 431
            assert "exceeds 65536 bytes" in first.json()["error"]["message"]
            assert (await http.post(url, headers=HTTP_HEADERS, json=INITIALIZE)).status_code == 200
            kept_alive = await http.post(url, headers={**HTTP_HEADERS, **HUGE_NAME}, json=INITIALIZE)  # same connection
            assert kept_alive.status_code == 431  # (it used to be dropped: "Server disconnected")
        async with aiohttp.ClientSession() as session:
            async with session.post(url, headers=HTTP_HEADERS, json=INITIALIZE) as answer:
                assert answer.status == 200
            async with session.post(url, headers={**HTTP_HEADERS, **HUGE_NAME}, json=INITIALIZE) as answer:
                assert answer.status == 431


@pytest.mark.parametrize("connection", ["keep-alive", "close"])
async def test_a_body_too_large_is_answered_413_while_it_is_still_sent(tmp_path: Path, connection: str) -> None:
    async with running_gateway(config(tmp_path)) as gateway:
        url, headers = f"{gateway.url}/mcp", {**HTTP_HEADERS, "Connection": connection}
        async with httpx.AsyncClient(timeout=30) as http:
            refused = await http.post(url, headers=headers, content=BIG_BODY)
            assert refused.status_code == 413
            assert "Payload Too Large" in refused.json()["error"]["message"]
            assert (await http.post(url, headers=HTTP_HEADERS, json=INITIALIZE)).status_code == 200
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, headers=headers, data=io.BytesIO(BIG_BODY)) as answer,
        ):
            assert answer.status == 413


async def test_a_body_slower_than_the_body_timeout_is_answered_408(tmp_path: Path) -> None:
    async with running_gateway(config(tmp_path, body_timeout_s=1)) as gateway:
        url = f"{gateway.url}/mcp"

        async def timed_out() -> None:
            await gateway.wait_for_event("request_body_timeout")

        slow = then_rest(b'{"jsonrpc": "2.0", ', timed_out, b'"id": 1, "method": "ping"}')
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.post(url, headers=HTTP_HEADERS, content=slow())
            assert answer.status_code == 408  # (the connection used to be closed with no answer)
            assert "body did not arrive within 1.0 s" in answer.json()["error"]["message"]
            assert (await http.post(url, headers=HTTP_HEADERS, json=INITIALIZE)).status_code == 200
        async with aiohttp.ClientSession() as session, session.post(url, headers=HTTP_HEADERS, data=slow()) as late:
            assert late.status == 408
        assert not [e for e in gateway.events if "Exception in ASGI" in str(e.get("event"))]


async def test_a_lingering_connection_is_counted_and_ends(tmp_path: Path) -> None:
    """Refused but still open (its client has not finished sending), it holds its address's one
    connection until its client stops, then at most as long as a silent connection may wait."""
    bounds = {"max_connections_per_client": 1, "header_timeout_s": 3}
    async with running_gateway(config(tmp_path, **bounds)) as gateway, AsyncExitStack() as stack:
        url = f"{gateway.url}/mcp"
        source = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
        lingering = await stack.enter_async_context(httpx.AsyncClient(timeout=30, transport=source))
        other = await stack.enter_async_context(
            httpx.AsyncClient(timeout=30, transport=httpx.AsyncHTTPTransport(local_address="127.0.0.2"))
        )
        never = anyio.Event()
        answers: list[httpx.Response | Exception] = []

        async def refused_and_still_sending() -> None:
            try:
                answers.append(await lingering.post(url, headers=HUGE_NAME, content=then_rest(b"{", never.wait)()))
            except httpx.TransportError as exc:
                answers.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(refused_and_still_sending)
            await gateway.wait_for_event("request_headers_too_large")
            held = await other.post(url, headers=HTTP_HEADERS, json=INITIALIZE)
            assert held.status_code == 503  # the lingering connection is the address's one
            assert "1 connections are open from this address" in held.text
            with anyio.fail_after(20):  # then it ends, though its client never finishes
                while (await other.post(url, headers=HTTP_HEADERS, json=INITIALIZE)).status_code != 200:
                    await anyio.sleep(0.1)
            never.set()
        assert len(answers) == 1  # the client, told nothing more, finds the connection closed
        assert await served(gateway)


async def served(gateway: RunningGateway) -> bool:
    async with httpx.AsyncClient(timeout=20) as http:
        return (await http.post(f"{gateway.url}/mcp", headers=HTTP_HEADERS, json=INITIALIZE)).status_code == 200
