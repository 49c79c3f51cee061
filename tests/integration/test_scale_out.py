"""Three gateway replicas behind a real HAProxy in plain round-robin (no affinity), sharing session keys
and a real Redis: SDK clients over Streamable HTTP and legacy HTTP+SSE list (paged), get, complete and
hear list_changed through the balancer; a replica killed mid-session; DELETE and cancellation across
replicas; Redis killed and restarted. Skipped with the reason where haproxy or redis-server is missing
(``.ci/run`` installs both and requires them)."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp.types as t
import pytest
from mcp import Client
from mcp.client.sse import sse_client

from tests.integration.helpers import (
    HTTP_HEADERS,
    INITIALIZE,
    ROOT,
    ListChangedWatcher,
    RunningGateway,
    demo_upstream,
    running_gateway,
    sdk_upstream,
    write_config,
)
from tests.integration.services import Redis, haproxy, redis_server, require_binary

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.services]
ELSEWHERE = "deleted by client on another replica"


@dataclass
class Fleet:
    url: str  # the balancer
    replicas: list[RunningGateway]
    prompts: Path
    redis: Redis
    stack: AsyncExitStack


def replica_config(path: Path, prompts: Path, redis_url: str) -> Path:
    faulty = {"namespace": "faulty", "command": "python3", "args": ["-m", "tests.servers.faulty"], "cwd": str(ROOT)}
    return write_config(
        path,
        [
            demo_upstream("eng", "engineering"),
            {"namespace": "team", "transport": "files", "path": str(prompts)},
            faulty,
            sdk_upstream("ask", "asking", protocol="legacy"),  # asks the client (elicitation) as it renders
        ],
        server={"transport": "http", "port": 0},
        gateway={"page_size": 3, "list_changed_debounce_s": 0.01, "cursor_secret": "fleet-cursor-secret-32-characters"},
        cluster={"session_keys": ["fleet-session-key-of-32-characters"], "redis_url": redis_url},
        policy={"deny": ["eng__internal_*"]},
    )


@asynccontextmanager
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    require_binary("haproxy", "haproxy")
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "standup.md").write_text("What did you do yesterday?")
    async with AsyncExitStack() as stack:
        redis = await stack.enter_async_context(redis_server())
        config = replica_config(tmp_path / "c.toml", prompts, redis.url)
        replicas = [await stack.enter_async_context(running_gateway(config)) for _ in range(3)]
        for replica in replicas:
            await replica.wait_for_event("redis_connected")
        backends = [replica.url.removeprefix("http://") for replica in replicas]
        url = await stack.enter_async_context(haproxy(tmp_path, backends))
        yield Fleet(url, replicas, prompts, redis, stack)


async def names(client: Client) -> list[str]:
    listed, cursor, pages = [], None, 0
    while True:
        page = await client.list_prompts(cursor=cursor)
        listed += [p.name for p in page.prompts]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            assert pages > 1  # paged: the cursor moved between replicas
            return listed


async def exercise(client: Client, fleet: Fleet, changes: ListChangedWatcher, new_prompt: str) -> None:
    listed = await names(client)
    assert {"eng__code_review", "team__standup", "faulty__ok"} <= set(listed)
    assert "eng__internal_debug_dump" not in listed
    for _ in range(3):  # each on another replica
        got = await client.get_prompt("eng__commit_message", {"diff": "+1"})
        assert isinstance(got.messages[0].content, t.TextContent)
        done = await client.complete(
            t.PromptReference(type="ref/prompt", name="eng__code_review"), {"name": "language", "value": "ru"}
        )
        assert done.completion.values == ["rust"]
    await anyio.Path(fleet.prompts / f"{new_prompt}.md").write_text("New.")
    await changes.wait()
    assert f"team__{new_prompt}" in await names(client)


async def who(context: object, params: t.ElicitRequestParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"name": "Ada"})


async def sdk_clients_through_the_balancer(f: Fleet) -> None:
    """SDK clients over Streamable HTTP and legacy HTTP+SSE: paged listing, gets, completions, list_changed,
    and an upstream asking the client while it renders (the request is on one replica, the client's event
    stream maybe on another)."""
    changes = ListChangedWatcher()
    async with Client(
        f"{f.url}/mcp", mode="legacy", cache=None, message_handler=changes, elicitation_callback=who
    ) as client:
        await exercise(client, f, changes, "retro")
        for _ in range(3):  # each get on another replica
            got = await client.get_prompt("ask__who")
            assert got.messages[0].content == t.TextContent(type="text", text="Hello, Ada (accept)")
    resumed = sum(1 for r in f.replicas for e in r.events if e.get("event") == "session_resumed")
    assert resumed >= 2  # the session really went from replica to replica

    changes = ListChangedWatcher()
    async with Client(sse_client(f"{f.url}/sse"), mode="legacy", cache=None, message_handler=changes) as client:
        await exercise(client, f, changes, "planning")  # posts reach the stream's replica through Redis


async def raw_as_a_client_would(
    http: httpx.AsyncClient, url: str, session_id: str, message: dict[str, Any]
) -> httpx.Response:
    """``raw``, sent once more where HAProxy closed the connection without an answer: it does so when the
    idle connection it reused went to the replica just killed, so that the client sends the request
    again (HAProxy's documented behaviour; an MCP client's reconnecting transport does the same)."""
    try:
        return await raw(http, url, session_id, message)
    except httpx.RemoteProtocolError:
        return await raw(http, url, session_id, message)


async def raw(http: httpx.AsyncClient, url: str, session_id: str, message: dict[str, Any]) -> httpx.Response:
    headers = {**HTTP_HEADERS, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
    return await http.post(f"{url}/mcp", json=message, headers=headers)


@pytest.mark.longest
async def test_three_replicas_behind_a_round_robin_balancer(tmp_path: Path) -> None:
    """One fleet for everything (three replicas, HAProxy and Redis take a while to start)."""
    async with fleet(tmp_path) as f, httpx.AsyncClient(timeout=30) as http:
        await sdk_clients_through_the_balancer(f)
        a, b, c = (replica.url for replica in f.replicas)

        # Every replica's config is known to the others; a reload on one shows that they now differ.
        async def cluster_view() -> dict[str, Any]:
            return (await http.get(f"{a}/readyz")).json()["cluster"]  # type: ignore[no-any-return]

        with anyio.fail_after(20):
            while len((view := await cluster_view()).get("config_generations", {})) < 3:
                await anyio.sleep(0.05)
        assert view["redis"] == "connected"
        assert view["replicas_agree"] is True

        # A GET stream resumed on another replica is told to list again only if the catalog changed since
        # the client's last event (its id carries the catalog's epoch, counted through Redis).
        stream_session = (await http.post(f"{a}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)).headers["mcp-session-id"]

        async def epoch_at_b() -> int:
            return (await http.get(f"{b}/readyz")).json()["cluster"]["catalog_epoch"]  # type: ignore[no-any-return]

        headers = {**HTTP_HEADERS, "Accept": "text/event-stream", "Mcp-Session-Id": stream_session}
        for offset, relist in ((1, False), (0, True), (None, True)):
            while True:  # a fan-out landing in between (the earlier file edits) changes the epoch: ask again
                epoch = await epoch_at_b()
                last = 7 if offset is None else (epoch + offset) * 10**9 + 5
                async with http.stream("GET", f"{b}/mcp", headers={**headers, "Last-Event-ID": str(last)}) as stream:
                    assert stream.status_code == 200
                    resumed = await f.replicas[1].wait_for_event("stream_resumed", session=stream_session[:8])
                if await epoch_at_b() == epoch:
                    break
            assert resumed["relist"] is relist, (last, epoch)
        config = tmp_path / "c.toml"
        config.write_text(
            config.read_text().replace("list_changed_debounce_s = 0.01", "list_changed_debounce_s = 0.02")
        )
        f.replicas[2].process.send_signal(signal.SIGHUP)
        await f.replicas[2].wait_for_event("config_reloaded")
        with anyio.fail_after(20):
            while (await cluster_view())["replicas_agree"]:
                await anyio.sleep(0.05)
        opened = await http.post(f"{a}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)
        session_id = opened.headers["mcp-session-id"]
        watcher = (await http.post(f"{b}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)).headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}

        status = {"jsonrpc": "2.0", "id": 4, "method": "prompts/get", "params": {"name": "faulty__cancel_status"}}

        async def upstream_status(url: str) -> dict[str, list[Any]]:
            answer = (await raw(http, url, watcher, status)).json()
            return json.loads(answer["result"]["messages"][0]["content"]["text"])  # type: ignore[no-any-return]

        # A cancel sent to one replica reaches the request running on another (and its upstream).
        slow = {"jsonrpc": "2.0", "id": 77, "method": "prompts/get", "params": {"name": "faulty__slow"}}
        answer: dict[str, Any] = {}

        async def run_slow() -> None:
            answer.update((await raw(http, a, session_id, slow)).json())

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_slow)
                while not (await upstream_status(a))["slow"]:
                    await anyio.sleep(0.05)  # until the slow request is with a's upstream
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 77}}
                assert (await raw(http, b, session_id, cancel)).status_code == 202
        assert answer["error"]["code"] == -32800
        assert (await upstream_status(a))["cancelled"]  # passed on to the upstream too

        # DELETE on one replica: the others refuse the session too.
        for url in (b, c):
            assert (await raw(http, url, session_id, listing)).status_code == 200
        deleted = await http.delete(f"{c}/mcp", headers={**HTTP_HEADERS, "Mcp-Session-Id": session_id})
        assert deleted.status_code == 200
        for replica in f.replicas[:2]:  # told through Redis, within milliseconds
            await replica.wait_for_event("session_ended", reason=ELSEWHERE, session=session_id[:8])
        for url in (a, b, c):
            assert (await raw(http, url, session_id, listing)).status_code == 404

        # A replica killed mid-session: the request it was serving fails with an error, the next is served.
        async def slow_ids() -> list[int]:
            return [len((await upstream_status(r.url))["slow"]) for r in f.replicas]

        before = await slow_ids()
        mine = (await http.post(f"{f.url}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)).headers["mcp-session-id"]
        outcome: list[Any] = []
        async with Client(f"{f.url}/mcp", mode="legacy", cache=None) as client:
            await client.list_prompts()

            async def in_flight() -> None:
                slow = {"jsonrpc": "2.0", "id": 9, "method": "prompts/get", "params": {"name": "faulty__slow"}}
                async with httpx.AsyncClient(timeout=30) as lone:  # a connection of its own
                    try:
                        outcome.append((await raw(lone, f.url, mine, slow)).status_code)
                    except httpx.RemoteProtocolError as exc:  # HAProxy's answer on a reused connection
                        outcome.append(exc)

            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(in_flight)
                    while (now := await slow_ids()) == before:
                        await anyio.sleep(0.05)  # until the request is with one replica's upstream
                    serving = next(i for i, (x, y) in enumerate(zip(before, now, strict=True)) if y > x)
                    f.replicas[serving].process.kill()
            assert len(outcome) == 1  # answered once, or failed: never lost silently
            assert outcome[0] == 502 or isinstance(outcome[0], httpx.RemoteProtocolError), outcome
            for _ in range(4):  # whichever replica the balancer picks, the session goes on
                assert (await raw_as_a_client_would(http, f.url, mine, listing)).status_code == 200
                assert (await client.list_prompts()).prompts
        alive = [r for i, r in enumerate(f.replicas) if i != serving]

        # Redis lost: serving goes on and /readyz says so in its body; Redis back: deletes cross again.
        assert f.redis.process is not None
        f.redis.process.kill()
        for replica in alive:
            await replica.wait_for_event("redis_unavailable")
        ready = await http.get(f"{alive[0].url}/readyz")
        assert ready.status_code == 200
        assert ready.json()["cluster"]["redis"] == "unavailable"
        session = (await http.post(f"{f.url}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)).headers["mcp-session-id"]
        for replica in alive:
            assert (await raw(http, replica.url, session, listing)).status_code == 200
        await f.stack.enter_async_context(redis_server(f.redis.port))
        for replica in alive:
            await replica.wait_for_event("redis_connected")
        assert (await http.get(f"{alive[0].url}/readyz")).json()["cluster"]["redis"] == "connected"
        deleted = await http.delete(f"{alive[0].url}/mcp", headers={**HTTP_HEADERS, "Mcp-Session-Id": session})
        assert deleted.status_code == 200
        await alive[1].wait_for_event("session_ended", reason=ELSEWHERE, session=session[:8])
        assert (await raw(http, alive[1].url, session, listing)).status_code == 404
