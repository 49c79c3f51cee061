"""Section ``listing``: ``prompts/list`` fanned out to many slow upstreams (beside FastMCP's proxy), and a
full paged listing first and from the listing cache; and whether replicas sharing upstream listing pages
through Redis would pay (measured in the ``cluster`` section).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from bench.clients import stdio_client
from bench.config import PY, ROOT, STARTUP_LIMIT_S, gateway_config, stdio_upstream
from bench.processes import (
    free_port,
    spawn,
)


async def bench_listing(quick: bool) -> dict[str, Any]:
    delay_ms = 50
    with tempfile.TemporaryDirectory() as tmp:
        # handshake era (no ttlMs) and no listChanged: the gateway caches none of their pages
        slow = {
            f"u{i}": {**stdio_upstream(PROMPTS="10", DELAY_MS=str(delay_ms), ANNOUNCE="0"), "protocol": "legacy"}
            for i in range(10)
        }
        config = gateway_config(Path(tmp) / "slow.toml", slow, http=False)
        async with stdio_client([PY, "-m", "gateway", "serve", "--config", str(config), "--log-level", "error"]) as c:
            await until_listed(c, 120)  # ready means listed: the gateway serves before its upstreams are up
            started = time.perf_counter()
            listing = await c.request("prompts/list", None)  # they announce nothing: nothing is cached
            fan_out_ms = (time.perf_counter() - started) * 1000
            assert len(listing["prompts"]) == 120, len(listing["prompts"])
        fastmcp_spec = json.dumps(
            {
                name: {
                    "command": PY,
                    "args": ["-m", "bench.upstream"],
                    "cwd": str(ROOT),
                    "env": {"PROMPTS": "10", "DELAY_MS": str(delay_ms)},
                }
                for name in slow
            }
        )
        async with stdio_client(
            [PY, "-m", "bench.fastmcp_proxy", "stdio", fastmcp_spec], {"PYTHONPATH": str(ROOT)}
        ) as c:
            started = time.perf_counter()
            await c.request("prompts/list", None)
            fastmcp_ms = (time.perf_counter() - started) * 1000

        big = {f"b{i}": stdio_upstream(PROMPTS="1000", PAGE="100") for i in range(5)}
        config = gateway_config(Path(tmp) / "big.toml", big, http=False, page_size=500)
        async with stdio_client([PY, "-m", "gateway", "serve", "--config", str(config), "--log-level", "error"]) as c:
            for name in big:  # each upstream up (a get waits for nothing cached) before the first listing
                await until_answers(c, f"{name}__calls")
            first_ms, count = await full_listing(c)
            before = [await calls(c, name) for name in big]
            cached_ms, cached_count = await full_listing(c)
            after = [await calls(c, name) for name in big]
    return {
        "delay_ms": delay_ms,
        "fan_out_10_upstreams_ms": fan_out_ms,
        "fan_out_ratio_to_one_delay": fan_out_ms / delay_ms,
        "fastmcp_10_upstreams_ms": fastmcp_ms,
        "full_listing_prompts": count,
        "full_listing_first_ms": first_ms,
        "full_listing_cached_ms": cached_ms,
        "upstream_list_calls_during_cached_listing": sum(after) - sum(before),
        "cached_listing_complete": cached_count == count,
    }


async def until_listed(client: Any, prompts: int) -> None:
    """Until one listing holds ``prompts`` prompts (a benchmark's poll, as a client would ask again)."""
    with anyio.fail_after(STARTUP_LIMIT_S):
        while len((await client.request("prompts/list", None))["prompts"]) < prompts:
            await anyio.sleep(0.05)


async def until_answers(client: Any, name: str) -> None:
    with anyio.fail_after(STARTUP_LIMIT_S):
        while True:
            try:
                await client.request("prompts/get", {"name": name})
                return
            except RuntimeError:  # not connected yet
                await anyio.sleep(0.05)


async def full_listing(client: Any) -> tuple[float, int]:
    started, count, params = time.perf_counter(), 0, None
    while True:
        page = await client.request("prompts/list", params)
        count += len(page["prompts"])
        if "nextCursor" not in page:
            return (time.perf_counter() - started) * 1000, count
        params = {"cursor": page["nextCursor"]}


async def calls(client: Any, namespace: str) -> int:
    result = await client.request("prompts/get", {"name": f"{namespace}__calls"})
    return int(result["messages"][0]["content"]["text"])


async def listing_pages_shared_or_not(quick: bool) -> dict[str, Any]:
    """Whether replicas sharing upstream listing pages through Redis would pay: one upstream's full
    listing (1,000 prompts, pages of 100) asked of the upstream itself, beside the same pages read back
    from a local Redis (redis-server, where installed), each page parsed as the gateway would."""
    import shutil

    binary = shutil.which("redis-server")
    if binary is None:
        return {}
    import redis.asyncio

    rounds = 5 if quick else 50
    port = free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    upstream = [PY, "-m", "bench.upstream"]
    async with spawn(command), stdio_client(upstream, {"PROMPTS": "1000", "PAGE": "100"}) as direct:
        store = redis.asyncio.Redis(port=port)
        with anyio.fail_after(20):
            while True:
                try:
                    await store.ping()
                    break
                except redis.ConnectionError:
                    await anyio.sleep(0.05)

        async def from_upstream() -> list[bytes]:
            pages, cursor = [], None
            while True:
                page = await direct.request("prompts/list", None if cursor is None else {"cursor": cursor})
                pages.append(json.dumps(page).encode())
                cursor = page.get("nextCursor")
                if cursor is None:
                    return pages

        pages = await from_upstream()
        for i, page in enumerate(pages):
            await store.set(f"page:{i}", page)
        started = time.perf_counter()
        for _ in range(rounds):
            await from_upstream()
        upstream_ms = (time.perf_counter() - started) * 1000 / rounds
        started = time.perf_counter()
        for _ in range(rounds):
            for i in range(len(pages)):
                json.loads(await store.get(f"page:{i}") or b"{}")
        redis_ms = (time.perf_counter() - started) * 1000 / rounds
        await store.aclose()
    return {"full_listing_from_upstream_ms": upstream_ms, "same_pages_from_redis_ms": redis_ms}
