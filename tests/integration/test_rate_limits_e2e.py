"""``[limits]`` end to end, real gateway processes: over stdio and in an HTTP session a request over its
rate is a JSON-RPC error (-32029, ``data.retryAfterMs``); a 2026-07-28 request over HTTP is answered 429
with ``Retry-After``; one identity limited leaves another's requests alone; refusals are audited; the
counts outlive a reload; three replicas behind HAProxy sharing Redis hold one rate between them."""

from __future__ import annotations

import itertools
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import mcp.types as t
import pytest
from mcp import Client, MCPError

from tests.integration.helpers import (
    demo_upstream,
    gateway_params,
    running_gateway,
    write_config,
)
from tests.integration.services import haproxy, redis_server, require_binary

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HTTP = {"transport": "http", "port": 0}
ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789ab"
TOKENS = [{"name": "alice", "token": ALICE}, {"name": "bob", "token": BOB}]
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}
ids = itertools.count(1)


def upstreams() -> list[dict[str, Any]]:
    return [demo_upstream("writing", "writing")]


async def modern_get(http: httpx.AsyncClient, url: str, token: str | None = None) -> httpx.Response:
    """A 2026-07-28 prompts/get, raw, as a client sends it (envelope in _meta, headers mirroring it)."""
    body = {
        "jsonrpc": "2.0",
        "id": next(ids),
        "method": "prompts/get",
        "params": {"_meta": ENVELOPE, "name": "writing__summarize", "arguments": {"text": "x"}},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "prompts/get",
        "Mcp-Name": "writing__summarize",
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return await http.post(url, json=body, headers=headers)


async def test_over_stdio_a_request_over_its_rate_is_a_json_rpc_error_saying_when(tmp_path: Path) -> None:
    config = write_config(tmp_path / "g.toml", upstreams(), limits={"methods": {"prompts/get": "2/minute"}})
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        for _ in range(2):
            await client.get_prompt("writing__summarize", {"text": "x"})
        with pytest.raises(MCPError) as refused:
            await client.get_prompt("writing__summarize", {"text": "x"})
        assert refused.value.error.code == -32029
        assert refused.value.error.data["limit"] == "prompts/get"
        assert 0 < refused.value.error.data["retryAfterMs"] <= 60_000
        assert (await client.list_prompts()).prompts  # another method's requests go on


async def test_the_get_prompt_tool_counts_against_the_prompts_get_limit(tmp_path: Path) -> None:
    """A tester spent a token's ``prompts/get`` limit, then was served two more through the ``get_prompt``
    tool (its ``tools/call`` limit alone was counted). A reviewer: counted after the rest, a tool call
    refused by that limit had used up the global bound all the same."""
    limits = {"global_rate": "8/minute", "methods": {"prompts/get": "2/minute", "prompts/list": "1/minute"}}
    config = write_config(tmp_path / "g.toml", upstreams(), limits=limits, server={"prompts_as_tools": True})
    call = {"name": "writing__summarize", "arguments": {"text": "x"}}
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        # Counted against the global bound: the get (1), the SDK's tools/list before a tool's first call and
        # the call (3), the same for list_prompts (5), two completions (7): under 8. The four tool calls
        # refused by prompts/get's own limit must count none of it (they took it to 11).
        await client.get_prompt("writing__summarize", {"text": "x"})
        assert not (await client.call_tool("get_prompt", call)).is_error  # the second prompts/get
        for _ in range(4):
            with pytest.raises(MCPError) as refused:
                await client.call_tool("get_prompt", call)
            assert (refused.value.error.code, refused.value.error.data["limit"]) == (-32029, "prompts/get")
        assert not (await client.call_tool("list_prompts", {})).is_error  # prompts/list's limit
        with pytest.raises(MCPError) as listed_too_often:
            await client.list_prompts()
        assert listed_too_often.value.error.data["limit"] == "prompts/list"
        for _ in range(2):
            await client.complete(
                t.PromptReference(type="ref/prompt", name="writing__translate"), {"name": "language", "value": "G"}
            )


async def test_over_http_one_identity_limited_leaves_another_alone_and_is_audited(tmp_path: Path) -> None:
    config = write_config(tmp_path / "g.toml", upstreams(), server=HTTP, tokens=TOKENS, limits={"rate": "3/minute"})
    async with running_gateway(config) as gateway, httpx.AsyncClient(timeout=30) as http:
        url = f"{gateway.url}/mcp"
        answers = [await modern_get(http, url, ALICE) for _ in range(5)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
        refused = answers[3]
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        error = refused.json()["error"]
        assert error["code"] == -32029
        assert error["data"]["limit"] == "rate"
        assert int(refused.headers["Retry-After"]) == -(-error["data"]["retryAfterMs"] // 1000)
        assert [(await modern_get(http, url, BOB)).status_code for _ in range(3)] == [200] * 3  # bob's own rate
        event = await gateway.wait_for_event("audit", outcome="rate_limited")
        assert event["who"] == {"kind": "token", "name": "alice"}
        assert event["prompt"] == "writing__summarize"
        assert event["code"] == -32029
        metrics = (await http.get(f"{gateway.url}/metrics")).text
        assert 'prompt_gateway_rate_limited_total{limit="rate"} 2.0' in metrics

        # a session's requests (the handshake era) are answered with the JSON-RPC error, HTTP 200;
        # connecting (initialize, server/discover) and ping are not counted
        bob = httpx.AsyncClient(headers={"Authorization": f"Bearer {BOB}"}, timeout=30)
        async with bob:
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw"}},
            }
            accept = {"Accept": "application/json, text/event-stream"}
            opened = await bob.post(url, json=init, headers=accept)
            assert "result" in opened.json()  # bob has spent his three
            session = {
                **accept,
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "MCP-Protocol-Version": "2025-11-25",
            }
            await bob.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            get = {"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": {"name": "writing__summarize"}}
            refused_in_session = await bob.post(url, json=get, headers=session)
            assert refused_in_session.status_code == 200
            assert refused_in_session.json()["error"]["code"] == -32029
            assert refused_in_session.json()["error"]["data"]["limit"] == "rate"
        metrics = (await http.get(f"{gateway.url}/metrics")).text
        assert 'prompt_gateway_requests_total{method="prompts/get",outcome="ok"} 6.0' in metrics  # stateless too
        assert 'prompt_gateway_requests_total{method="prompts/get",outcome="-32029"} 3.0' in metrics


async def test_the_counts_outlive_a_reload(tmp_path: Path) -> None:
    path = write_config(tmp_path / "g.toml", upstreams(), server=HTTP, limits={"rate": "2/minute"})
    async with running_gateway(path, "--watch") as gateway, httpx.AsyncClient(timeout=30) as http:
        url = f"{gateway.url}/mcp"
        assert [(await modern_get(http, url)).status_code for _ in range(2)] == [200, 200]
        write_config(path, upstreams(), server=HTTP, limits={"rate": "2/minute", "burst": "50/second"})
        await gateway.wait_for_event("config_reloaded")
        assert (await modern_get(http, url)).status_code == 429  # what was spent before the reload still counts


@pytest.mark.services
@pytest.mark.parametrize("in_redis", [False, True], ids=["memory", "redis"])
async def test_a_reload_that_changes_the_rate_applies_it_to_the_counts_so_far(tmp_path: Path, in_redis: bool) -> None:
    """The library's keys held the amount: after 2/minute became 3/minute everyone started afresh."""
    async with AsyncExitStack() as stack:
        cluster = None
        if in_redis:
            redis = await stack.enter_async_context(redis_server())
            cluster = {"session_keys": ["fleet-session-key-of-32-characters"], "redis_url": redis.url}
        path = write_config(tmp_path / "g.toml", upstreams(), server=HTTP, limits={"rate": "2/minute"}, cluster=cluster)
        gateway = await stack.enter_async_context(running_gateway(path, "--watch"))
        if in_redis:
            await gateway.wait_for_event("redis_connected")
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        url = f"{gateway.url}/mcp"
        assert [(await modern_get(http, url)).status_code for _ in range(2)] == [200, 200]
        write_config(path, upstreams(), server=HTTP, limits={"rate": "3 per 1 minute"}, cluster=cluster)
        await gateway.wait_for_event("config_reloaded")
        assert [(await modern_get(http, url)).status_code for _ in range(3)] == [200, 429, 429]


@pytest.mark.services
async def test_three_replicas_behind_haproxy_share_one_rate_through_redis(tmp_path: Path) -> None:
    """Round robin: without Redis each replica would let 5 a minute through, 15 in all."""
    require_binary("haproxy", "haproxy")
    async with AsyncExitStack() as stack:
        redis = await stack.enter_async_context(redis_server())
        config = write_config(
            tmp_path / "g.toml",
            upstreams(),
            server=HTTP,
            limits={"rate": "5/minute"},
            cluster={"session_keys": ["fleet-session-key-of-32-characters"], "redis_url": redis.url},
        )
        replicas = [await stack.enter_async_context(running_gateway(config)) for _ in range(3)]
        for replica in replicas:
            await replica.wait_for_event("redis_connected")
        balancer = await stack.enter_async_context(haproxy(tmp_path, [r.url.removeprefix("http://") for r in replicas]))
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        statuses = [(await modern_get(http, f"{balancer}/mcp")).status_code for _ in range(15)]
        assert statuses.count(200) == 5, statuses  # the moving window counted in Redis: exact
        assert statuses.count(429) == 10
