"""Sealed session ids between real gateway processes: a session begun on one is served by another with
the same ``[cluster] session_keys`` and survives a restart; a tampered id and one its client deleted
answer 404 (other keys: tests/test_session_ids.py). (Three replicas behind HAProxy with Redis: test_scale_out.py.)"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import redis.asyncio as aioredis

from gateway.cluster.replicas import PREFIX, session_key
from tests.integration.helpers import (
    HTTP_HEADERS,
    INITIALIZE,
    RunningGateway,
    demo_upstream,
    running_gateway,
    write_config,
)
from tests.integration.services import redis_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
KEYS = {"session_keys": ["a-session-key-of-32-characters!!", "an-older-key-still-accepted-here"]}


def config(path: Path, cluster: dict[str, Any] | None = KEYS, **server: Any) -> Path:
    server = {"transport": "http", "port": 0, **server}
    return write_config(path, [demo_upstream("writing", "writing")], server=server, cluster=cluster)


ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def another_spelling(session_id: str) -> str:
    """The id with the unused low bit of its last base64url character set otherwise: the same bytes."""
    assert len(session_id.partition(".")[2]) % 4 in (2, 3), "this id's last character has no unused bits"
    return session_id[:-1] + ALPHABET[ALPHABET.index(session_id[-1]) ^ 1]


async def call(client: httpx.AsyncClient, url: str, session_id: str, method: str, id_: int = 2) -> httpx.Response:
    message = {"jsonrpc": "2.0", "id": id_, "method": method}
    headers = {**HTTP_HEADERS, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
    return await client.post(url, json=message, headers=headers)


async def test_a_session_begun_on_one_gateway_is_served_by_another_with_the_keys(tmp_path: Path) -> None:
    async with (
        running_gateway(config(tmp_path / "a.toml")) as a,
        running_gateway(config(tmp_path / "b.toml")) as b,
        httpx.AsyncClient(timeout=20) as http,
    ):
        opened = await http.post(f"{a.url}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)
        assert opened.status_code == 200
        session_id = opened.headers["mcp-session-id"]
        assert session_id.startswith("s1.")
        for gateway in (b, a, b):
            listed = await call(http, f"{gateway.url}/mcp", session_id, "prompts/list")
            assert listed.status_code == 200, listed.text
            assert "writing__summarize" in listed.text
        resumed = await b.wait_for_event("session_resumed")
        assert resumed["session"] == session_id[:8]

        # A stream resumed on another replica with the Last-Event-ID the first one numbered: nothing to
        # replay there, so the client is told to list again (it would otherwise skip that many new events).
        headers = {**HTTP_HEADERS, "Accept": "text/event-stream", "Mcp-Session-Id": session_id, "Last-Event-ID": "7"}
        with anyio.fail_after(10):
            async with http.stream("GET", f"{b.url}/mcp", headers=headers) as stream:
                assert stream.status_code == 200
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        assert json.loads(line[5:])["method"] == "notifications/prompts/list_changed"
                        break

        tampered = session_id[:-4] + ("AAAA" if not session_id.endswith("AAAA") else "BBBB")
        assert (await call(http, f"{b.url}/mcp", tampered, "prompts/list")).status_code == 404

        assert (await call(http, f"{a.url}/mcp", another_spelling(session_id), "prompts/list")).status_code == 404
        deleted = await http.delete(f"{b.url}/mcp", headers={**HTTP_HEADERS, "Mcp-Session-Id": session_id})
        assert deleted.status_code == 200
        assert (await call(http, f"{b.url}/mcp", session_id, "prompts/list")).status_code == 404
        for gateway in (a, b):  # the deleted id under another spelling of its bytes opens nowhere
            assert (
                await call(http, f"{gateway.url}/mcp", another_spelling(session_id), "prompts/list")
            ).status_code == 404


async def test_a_session_outlives_a_restart_of_its_gateway(tmp_path: Path) -> None:
    path = config(tmp_path / "a.toml")
    async with httpx.AsyncClient(timeout=20) as http:
        async with running_gateway(path) as first:
            opened = await http.post(f"{first.url}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)
            session_id = opened.headers["mcp-session-id"]
        async with running_gateway(path) as second:
            listed = await call(http, f"{second.url}/mcp", session_id, "prompts/list")
            assert listed.status_code == 200, listed.text


async def test_an_expired_session_is_refused_on_every_replica_that_served_it(tmp_path: Path) -> None:
    """``session_ttl_s`` holds on every request: the gateway that issued the id and a replica that
    resumed it answered 200 long after it, while a replica that never saw it answered 404."""
    ttl = {**KEYS, "session_ttl_s": 2}
    async with (
        running_gateway(config(tmp_path / "a.toml", ttl)) as a,
        running_gateway(config(tmp_path / "b.toml", ttl)) as b,
        httpx.AsyncClient(timeout=20) as http,
    ):
        opened = await http.post(f"{a.url}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)
        session_id = opened.headers["mcp-session-id"]
        expires = time.time() + 2
        for gateway in (a, b):
            assert (await call(http, f"{gateway.url}/mcp", session_id, "ping")).status_code == 200
        stream_headers = {**HTTP_HEADERS, "Accept": "text/event-stream", "Mcp-Session-Id": session_id}
        async with http.stream("GET", f"{a.url}/mcp", headers=stream_headers) as stream:
            assert stream.status_code == 200
            with anyio.fail_after(10):  # an open stream ends with its session (it ran on past the TTL)
                async for _ in stream.aiter_bytes():
                    pass
        assert time.time() >= expires - 0.1
        await anyio.sleep(max(0.0, expires - time.time()) + 0.2)  # a deadline, not an event: time must pass
        for gateway in (a, b, a, b):
            assert (await call(http, f"{gateway.url}/mcp", session_id, "ping")).status_code == 404


async def test_a_legacy_sse_session_ends_with_session_ttl_s(tmp_path: Path) -> None:
    """A legacy HTTP+SSE session (its id is not sealed) answered long after session_ttl_s."""
    async with (
        running_gateway(config(tmp_path / "a.toml", {**KEYS, "session_ttl_s": 2})) as a,
        httpx.AsyncClient(timeout=20) as http,
        http.stream("GET", f"{a.url}/sse", headers={"Accept": "text/event-stream"}) as stream,
    ):
        lines = stream.aiter_lines()
        endpoint = ""
        while not endpoint.startswith("data:"):
            endpoint = await anext(lines)
        started = time.time()
        with anyio.fail_after(10):
            async for _ in lines:  # the stream ends when the session does
                pass
        assert time.time() - started >= 1.5
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        posted = await http.post(f"{a.url}{endpoint[5:].strip()}", json=ping, headers=HTTP_HEADERS)
        assert posted.status_code == 404


async def idle_ended(gateway: RunningGateway, sessions: list[str]) -> None:
    for session_id in sessions:
        await gateway.wait_for_event("session_ended", session=session_id[:8], reason="idle")


async def test_an_idle_session_ends_for_good_on_a_lone_gateway(tmp_path: Path) -> None:
    """Idle sessions left memory and were resumed from their sealed ids (20 of 20 answered 200)."""
    async with (
        running_gateway(config(tmp_path / "a.toml", None, session_idle_timeout_s=1)) as a,
        httpx.AsyncClient(timeout=20) as http,
    ):
        sessions = [
            (await http.post(f"{a.url}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)).headers["mcp-session-id"]
            for _ in range(5)
        ]
        await idle_ended(a, sessions)
        for session_id in sessions:
            assert (await call(http, f"{a.url}/mcp", session_id, "ping")).status_code == 404


@pytest.mark.services
async def test_idle_expiry_across_replicas_follows_the_sessions_use_anywhere(tmp_path: Path) -> None:
    """With Redis the replicas share when a session was last used: one idle on A but in use on B only
    leaves A's memory (A resumes it), and once it is idle everywhere no replica serves it."""
    async with redis_server() as redis:
        shared = {**KEYS, "redis_url": redis.url}
        async with (
            running_gateway(config(tmp_path / "a.toml", shared, session_idle_timeout_s=1)) as a,
            running_gateway(config(tmp_path / "b.toml", shared, session_idle_timeout_s=1)) as b,
            httpx.AsyncClient(timeout=20) as http,
        ):
            for gateway in (a, b):
                await gateway.wait_for_event("redis_connected")
            opened = await http.post(f"{a.url}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)
            session_id = opened.headers["mcp-session-id"]
            async with anyio.create_task_group() as tg:

                async def use_on_b() -> None:
                    while True:
                        assert (await call(http, f"{b.url}/mcp", session_id, "ping")).status_code == 200
                        await anyio.sleep(0.1)

                tg.start_soon(use_on_b)
                await idle_ended(a, [session_id])  # idle on A, in use on B
                assert (await call(http, f"{a.url}/mcp", session_id, "ping")).status_code == 200  # resumed
                tg.cancel_scope.cancel()
            # Idle everywhere once the shared record of its use lapses (asking a replica would be a use)
            record = f"{PREFIX}active:{session_key(session_id)}"
            async with aioredis.Redis.from_url(redis.url) as watcher:
                with anyio.fail_after(10):
                    while await watcher.exists(record):
                        await anyio.sleep(0.05)
            for gateway in (b, a):
                assert (await call(http, f"{gateway.url}/mcp", session_id, "ping")).status_code == 404


async def test_a_session_refused_where_it_would_resume_is_refused_under_its_requests_id(tmp_path: Path) -> None:
    """A reviewer: a request that would resume its session on a replica with no room for it was answered
    503 under id null, though its body had been read."""
    async with (
        running_gateway(config(tmp_path / "a.toml")) as a,
        running_gateway(config(tmp_path / "b.toml", max_sessions=1)) as b,
        httpx.AsyncClient(timeout=20) as http,
    ):
        held = (await http.post(f"{b.url}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)).headers["mcp-session-id"]
        stream = {**HTTP_HEADERS, "Accept": "text/event-stream", "Mcp-Session-Id": held}
        async with http.stream("GET", f"{b.url}/mcp", headers=stream) as opened:  # (a session with a stream stays)
            assert opened.status_code == 200
            elsewhere = (await http.post(f"{a.url}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)).headers[
                "mcp-session-id"
            ]
            refused = await call(http, f"{b.url}/mcp", elsewhere, "prompts/list", id_=9)
    assert (refused.status_code, refused.json()["id"]) == (503, 9), refused.text
