"""Run the benchmarks: ``python -m bench [--quick] [--out bench/results.json]``.

Everything is measured in one run, side by side, with the same upstream (an official-SDK server):
direct to it, through this gateway, and through FastMCP's proxy. Prints a table, writes JSON. The HTTP
load is made by wrk where installed, the stdio load by a lean Python client: the load shares the two
cores with the servers it measures, so it must take as little of them as it can.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from bench.clients import StdioClient, children, http_client, load, stdio_client, wrk_load, wrk_version
from bench.config import PY, ROOT, STARTUP_LIMIT_S, gateway_config, stdio_upstream, toml
from bench.startup import bench_startup

UPSTREAM = [PY, "-m", "bench.upstream"]


@asynccontextmanager
async def spawn(command: list[str], env: dict[str, str] | None = None) -> AsyncIterator[Process]:
    full_env = {**os.environ, **(env or {})}
    async with await anyio.open_process(command, cwd=ROOT, env=full_env) as process:
        try:
            yield process
        finally:
            process.terminate()
            with anyio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()


async def first_line(process: Process, stream: str = "stdout") -> bytes:
    source = process.stdout if stream == "stdout" else process.stderr
    assert source is not None
    with anyio.fail_after(120):
        return await BufferedByteReceiveStream(source).receive_until(b"\n", 1 << 20)


@asynccontextmanager
async def http_gateway(config: Path) -> AsyncIterator[tuple[str, Process]]:
    async with spawn([PY, "-m", "gateway", "serve", "--config", str(config), "--log-level", "info"]) as process:
        assert process.stderr is not None
        lines = BufferedByteReceiveStream(process.stderr)
        with anyio.fail_after(120):
            while True:
                event = json.loads(await lines.receive_until(b"\n", 1 << 20))
                if event.get("event") == "http_listening":
                    break

        async def drain() -> None:
            try:
                while True:
                    await lines.receive()
            except Exception:
                return

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            yield event["url"], process
            tg.cancel_scope.cancel()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# ---- 1. prompts/get latency and throughput ------------------------------------------------------------


async def bench_gets(quick: bool, transports: set[str], *, use_wrk: bool) -> list[dict[str, Any]]:
    """Handshake-era clients (direct, gateway, FastMCP) and 2026-07-28 clients (direct-26, gateway-26).
    The gateway speaks to the upstream in the era of the client it measures, so the upstream does the
    same work as when it is called directly (the SDK server's 2026-07-28 path costs it ~20% more CPU)."""
    total, budget = (200, 2.0) if quick else (3000, 15.0)
    rounds = 1 if quick else ROUNDS
    levels = (1, 16) if quick else (1, 16, 64)  # a smoke run checks the harness, not the 64-in-flight numbers
    per_round, round_budget = total // rounds, budget / rounds
    rows: list[dict[str, Any]] = []
    fastmcp_spec = json.dumps({"up": {"command": PY, "args": ["-m", "bench.upstream"], "cwd": str(ROOT)}})
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        legacy = gateway_config(tmp_path / "g.toml", {"up": {**stdio_upstream(), "protocol": "legacy"}}, http=False)
        modern = gateway_config(tmp_path / "m.toml", {"up": {**stdio_upstream(), "protocol": "modern"}}, http=False)

        def gateway(config: Path) -> list[str]:
            return [PY, "-m", "gateway", "serve", "--config", str(config), "--log-level", "error"]

        stdio_targets = {
            "direct": ([*UPSTREAM], "p00001", False),
            "gateway": (gateway(legacy), "up__p00001", False),
            "fastmcp": ([PY, "-m", "bench.fastmcp_proxy", "stdio", fastmcp_spec], "up_p00001", False),
            "direct-26": ([*UPSTREAM], "p00001", True),
            "gateway-26": (gateway(modern), "up__p00001", True),
            # the floor of the gateway's own stdio transport: frames relayed as they came, nothing else
            "relay": ([PY, "-m", "bench.stdio_relay", *UPSTREAM], "p00001", False),
            "relay-26": ([PY, "-m", "bench.stdio_relay", *UPSTREAM], "p00001", True),
        }
        for concurrency in levels if "stdio" in transports else ():
            async with AsyncExitStack() as stack:
                stdio_clients: dict[str, tuple[StdioClient, str, dict[str, int]]] = {}
                for target, (command, name, is_modern) in stdio_targets.items():
                    started = await stack.enter_async_context(
                        stdio_client(command, {"PYTHONPATH": str(ROOT)}, modern=is_modern)
                    )
                    await started.request("prompts/get", {"name": name, "arguments": {"topic": "start"}})  # all up
                    pid = started.pid
                    proxied = not target.startswith("direct")
                    cpu_of = {"middle": pid, "upstream": children(pid)[0]} if proxied else {"upstream": pid}
                    stdio_clients[target] = (started, name, cpu_of)

                measures = {
                    target: partial(
                        load,
                        client,
                        name,
                        concurrency=concurrency,
                        total=per_round,
                        budget_s=round_budget,
                        cpu_of=cpu_of,
                    )
                    for target, (client, name, cpu_of) in stdio_clients.items()
                }
                for target, measured in (await in_rounds(measures, rounds)).items():
                    rows.append({"transport": "stdio", "target": target, "concurrency": concurrency, **measured})
        if "http" not in transports:
            return rows
        async with spawn([*UPSTREAM], {"SERVE": "http"}) as upstream:
            url = f"http://127.0.0.1:{int(await first_line(upstream))}/mcp"

            def http_config(name: str, protocol: str) -> Path:
                remote = {"transport": "streamable-http", "url": url, "protocol": protocol}
                return gateway_config(tmp_path / name, {"up": remote}, http=True)

            proxy_spec = json.dumps({"up": {"url": url, "transport": "http"}})
            async with (
                http_gateway(http_config("h.toml", "legacy")) as (gateway_url, gateway_process),
                http_gateway(http_config("hm.toml", "modern")) as (modern_gateway_url, modern_gateway_process),
                spawn([PY, "-m", "bench.fastmcp_proxy", "http", proxy_spec]) as proxy,
                haproxy_relay(shutil.which("haproxy"), url, tmp_path) as relay,
                spawn([PY, "-m", "bench.relay", url]) as bare_relay,
            ):
                proxy_url = f"http://127.0.0.1:{int(await first_line(proxy))}/mcp"
                await wait_http(proxy_url)
                bare_relay_url = f"http://127.0.0.1:{int(await first_line(bare_relay))}/mcp"
                await wait_http(bare_relay_url)
                http_targets = {
                    "direct": (url, "p00001", False, None),
                    "gateway": (gateway_url, "up__p00001", False, gateway_process.pid),
                    "fastmcp": (proxy_url, "up_p00001", False, proxy.pid),
                    "direct-26": (url, "p00001", True, None),
                    "gateway-26": (modern_gateway_url, "up__p00001", True, modern_gateway_process.pid),
                    # the floor of the gateway's own libraries: uvicorn and aiohttp relaying, nothing else
                    "relay": (bare_relay_url, "p00001", False, bare_relay.pid),
                    "relay-26": (bare_relay_url, "p00001", True, bare_relay.pid),
                }
                if relay is not None:  # the floor: a plain HTTP relay in front of the same upstream
                    relay_url, relay_pid = relay
                    http_targets["haproxy"] = (relay_url, "p00001", False, relay_pid)
                    http_targets["haproxy-26"] = (relay_url, "p00001", True, relay_pid)
                for concurrency in levels:
                    measures = {
                        target: partial(
                            load_http,
                            target_url,
                            name,
                            modern=is_modern,
                            use_wrk=use_wrk,
                            concurrency=concurrency,
                            total=per_round // 2,
                            budget_s=round_budget,
                            cpu_of={"upstream": upstream.pid} | ({} if middle is None else {"middle": middle}),
                        )
                        for target, (target_url, name, is_modern, middle) in http_targets.items()
                    }
                    for target, measured in (await in_rounds(measures, rounds)).items():
                        rows.append({"transport": "http", "target": target, "concurrency": concurrency, **measured})
    return rows


ROUNDS = 3
"""Each target is measured in this many rounds, the targets taking turns, and the median is reported:
on a shared machine a slow spell then hits one round of every target rather than one target's run."""


WRK = wrk_version()


async def load_http(
    url: str,
    name: str,
    *,
    modern: bool,
    use_wrk: bool,
    concurrency: int,
    total: int,
    budget_s: float,
    cpu_of: dict[str, int],
    headers: Mapping[str, str] | None = None,
    initialize_at: str | None = None,
) -> dict[str, Any]:
    """A load on ``url`` from a fresh HTTP client's session: made by wrk where installed (for ``budget_s``),
    else by the Python client (``total`` requests or ``budget_s``, whichever ends first)."""
    async with http_client(url, modern=modern, headers=headers, initialize_at=initialize_at) as client:
        if not use_wrk:
            return await load(client, name, concurrency=concurrency, total=total, budget_s=budget_s, cpu_of=cpu_of)
        seconds = max(1, round(budget_s))
        return await wrk_load(client, url, name, concurrency=concurrency, seconds=seconds, cpu_of=cpu_of)


async def in_rounds(measures: Mapping[str, Callable[[], Awaitable[dict[str, Any]]]], rounds: int) -> dict[str, Any]:
    """Each target measured ``rounds`` times, the targets taking turns; the medians of each."""
    measured: dict[str, list[dict[str, Any]]] = {target: [] for target in measures}
    for _ in range(rounds):
        for target, measure in measures.items():
            measured[target].append(await measure())
    return {target: median_of(results) for target, results in measured.items()}


def median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    median = statistics.median
    combined: dict[str, Any] = {key: median([r[key] for r in rounds]) for key in ("p50_ms", "p99_ms", "rps")}
    combined["failed"] = sum(r["failed"] for r in rounds)
    combined["rounds"] = len(rounds)
    cpus = [r["cpu_us_per_request"] for r in rounds if "cpu_us_per_request" in r]
    if cpus:
        combined["cpu_us_per_request"] = {label: median([c[label] for c in cpus]) for label in cpus[0]}
    return combined


async def wait_http(url: str) -> None:
    """A freshly started server: retry the connection until it accepts (it prints its port first)."""
    async with httpx.AsyncClient() as http:
        with anyio.fail_after(60):
            while True:
                try:
                    await http.get(url)
                    return
                except httpx.TransportError:
                    await anyio.sleep(0.1)


# ---- 2. listing fan-out and the listing cache ---------------------------------------------------------


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


# ---- 3. list_changed fan-out to HTTP sessions, and memory per session --------------------------------


async def bench_sessions(quick: bool) -> dict[str, Any]:
    """list_changed from one upstream change to N HTTP sessions' GET streams: when the first and the last
    session had it (after a 10 ms debounce), and memory per session."""
    return {"rows": [await sessions_row(count) for count in ((100,) if quick else (1000, 10_000))]}


async def sessions_row(sessions: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        config = gateway_config(Path(tmp) / "s.toml", {"up": stdio_upstream()}, http=True, list_changed_debounce_s=0.01)
        async with http_gateway(config) as (url, process):
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            base_rss = rss_kib(process.pid)
            ids = await open_sessions(url, sessions)
            streams = [await open_stream(port, session_id) for session_id in ids]
            for stream in streams:
                await read_until(stream, b"\r\n\r\n")  # response headers: the stream is open
            loaded_rss = rss_kib(process.pid)
            arrivals: list[float] = []
            async with http_client(url) as trigger:
                done = anyio.Event()

                async def wait_one(stream: Any) -> None:
                    await read_until(stream, b"list_changed")
                    arrivals.append(time.perf_counter())
                    if len(arrivals) == len(streams):
                        done.set()

                async with anyio.create_task_group() as tg:
                    for stream in streams:
                        tg.start_soon(wait_one, stream)
                    started = time.perf_counter()
                    await trigger.request("prompts/get", {"name": "up__touch"})
                    with anyio.fail_after(120):
                        await done.wait()
            for stream in streams:
                await stream.aclose()
    return {
        "sessions": sessions,
        "debounce_ms": 10,
        "first_session_ms": (min(arrivals) - started) * 1000,
        "last_session_ms": (max(arrivals) - started) * 1000,
        "rss_per_session_kib": (loaded_rss - base_rss) / sessions,
    }


async def open_sessions(url: str, count: int) -> list[str]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=32)) as http:
        ids = []
        for _ in range(count):
            response = await http.post(url, json=body, headers=headers)
            session_id = response.headers["mcp-session-id"]
            await http.post(
                url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers={**headers, "Mcp-Session-Id": session_id},
            )
            ids.append(session_id)
        return ids


async def open_stream(port: int, session_id: str) -> Any:
    connection = await anyio.connect_tcp("127.0.0.1", port)
    request = (
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
        f"Mcp-Session-Id: {session_id}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    )
    await connection.send(request.encode())
    return BufferedByteReceiveStream(connection)


async def read_until(stream: Any, marker: bytes) -> None:
    await stream.receive_until(marker, 1 << 20)


# ---- 5. access tokens: a JWT (its issuer's keys cached) beside a static token ---------------------------


async def bench_auth(quick: bool, use_wrk: bool) -> dict[str, Any]:
    """Gateway CPU per ``prompts/get`` over HTTP at 16 in flight, authenticated by a JWT access token
    (signature and claims checked, keys from an issuer served here) beside a static bearer token, same run."""
    import jwt
    import uvicorn
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = {**json.loads(RSAAlgorithm.to_jwk(key.public_key())), "kid": "bench", "alg": "RS256", "use": "sig"}
    issuer_port, gateway_port = free_port(), free_port()
    issuer = f"http://127.0.0.1:{issuer_port}"
    resource = f"http://127.0.0.1:{gateway_port}/mcp"
    metadata = {"issuer": issuer, "jwks_uri": f"{issuer}/jwks"}
    issuer_app = Starlette(
        routes=[
            Route("/.well-known/oauth-authorization-server", lambda _: JSONResponse(metadata)),
            Route("/jwks", lambda _: JSONResponse({"keys": [public]})),
        ]
    )
    server = uvicorn.Server(uvicorn.Config(issuer_app, host="127.0.0.1", port=issuer_port, log_config=None))
    static = "bench-static-token-0123456789"
    claims = {"iss": issuer, "aud": resource, "sub": "bench", "scope": "prompts:read", "exp": int(time.time()) + 3600}
    access_token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "bench"})
    upstream = stdio_upstream()
    lines = [
        "[server]", 'transport = "http"', f"port = {gateway_port}", "max_connections_per_client = 20000",
        "[server.auth]", f"resource = {json.dumps(resource)}",
        "[[server.auth.issuers]]", f"issuer = {json.dumps(issuer)}",
        "[[server.tokens]]", 'name = "bench"', f"token = {json.dumps(static)}",
        "[[upstreams]]", 'namespace = "up"', *(f"{k} = {toml(v)}" for k, v in upstream.items()),
    ]  # fmt: skip
    seconds = 1 if quick else 8
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "auth.toml"
        config.write_text("\n".join(lines) + "\n")
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            async with http_gateway(config) as (url, process):
                measures = {
                    name: partial(
                        load_http, url, "up__p00001", modern=False, use_wrk=use_wrk, concurrency=16,
                        total=500 if quick else 4000, budget_s=seconds, cpu_of={"middle": process.pid},
                        headers={"Authorization": f"Bearer {token}"},
                    )
                    for name, token in (("static token", static), ("JWT", access_token))
                }  # fmt: skip
                measured = await in_rounds(measures, 1 if quick else ROUNDS)
            server.should_exit = True
    static_cpu = measured["static token"]["cpu_us_per_request"]["middle"]
    jwt_cpu = measured["JWT"]["cpu_us_per_request"]["middle"]
    return {
        "rows": [{"token": name, **row} for name, row in measured.items()],
        "jwt_vs_static_gateway_cpu_at_16": jwt_cpu / static_cpu,
    }


# ---- 6. telemetry: every request traced, beside tracing off ---------------------------------------------


@asynccontextmanager
async def otlp_sink() -> AsyncIterator[str]:
    """Somewhere for the traced gateway to export to: an OTLP/HTTP endpoint that takes every export and
    answers success (a collector's cost is not the gateway's)."""
    from aiohttp import web

    async def accept(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", accept)
    app.router.add_post("/v1/metrics", accept)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def bench_telemetry(quick: bool, use_wrk: bool) -> dict[str, Any]:
    """Gateway CPU per ``prompts/get`` over HTTP at 16 in flight with ``[telemetry]`` on, every request
    sampled (a SERVER and a CLIENT span each, the duration histograms, OTLP export), beside off, same run,
    both eras; and with one trace in ten sampled (2026-07-28), with and without the histograms (what an
    unsampled request still costs is mostly theirs)."""
    seconds = 1 if quick else 8
    with tempfile.TemporaryDirectory() as tmp:
        async with otlp_sink() as sink, spawn([*UPSTREAM], {"SERVE": "http"}) as upstream:
            url = f"http://127.0.0.1:{int(await first_line(upstream))}/mcp"

            def config(name: str, protocol: str, *, sampled: float | None, metrics: bool = True) -> Path:
                remote = {"transport": "streamable-http", "url": url, "protocol": protocol}
                path = gateway_config(Path(tmp) / name, {"up": remote}, http=True)
                if sampled is not None:
                    settings = [
                        "[telemetry]",
                        "enabled = true",
                        f"endpoint = {toml(sink)}",
                        f"sample_ratio = {sampled}",
                        f"metrics = {toml(metrics)}",
                    ]
                    path.write_text(path.read_text() + "\n".join(settings) + "\n")
                return path

            async with (
                http_gateway(config("off.toml", "legacy", sampled=None)) as (off_url, off),
                http_gateway(config("on.toml", "legacy", sampled=1.0)) as (on_url, on),
                http_gateway(config("off26.toml", "modern", sampled=None)) as (off26_url, off26),
                http_gateway(config("on26.toml", "modern", sampled=1.0)) as (on26_url, on26),
                http_gateway(config("tenth26.toml", "modern", sampled=0.1)) as (tenth26_url, tenth26),
                http_gateway(config("bare26.toml", "modern", sampled=0.1, metrics=False)) as (bare26_url, bare26),
            ):
                targets = {
                    "off": (off_url, off, False),
                    "traced": (on_url, on, False),
                    "off-26": (off26_url, off26, True),
                    "traced-26": (on26_url, on26, True),
                    "sampled-10%-26": (tenth26_url, tenth26, True),
                    "sampled-10%-no-metrics-26": (bare26_url, bare26, True),
                }
                measures = {
                    name: partial(
                        load_http, target_url, "up__p00001", modern=modern, use_wrk=use_wrk, concurrency=16,
                        total=500 if quick else 4000, budget_s=seconds,
                        cpu_of={"upstream": upstream.pid, "middle": process.pid},
                    )
                    for name, (target_url, process, modern) in targets.items()
                }  # fmt: skip
                measured = await in_rounds(measures, 1 if quick else ROUNDS)
            # the SDK's own floor: the same spans, context and histograms made by the SDK alone, exported
            # to the same sink, no gateway around them
            floor_run = await anyio.run_process([PY, "-m", "bench.otel_floor", sink, str(2000 if quick else 20000)])
            floor = float(json.loads(floor_run.stdout)["cpu_us_per_request"])

    def cpu(name: str) -> float:
        return float(measured[name]["cpu_us_per_request"]["middle"])

    return {
        "rows": [{"telemetry": name, **row} for name, row in measured.items()],
        "sdk_alone_cpu_us_per_request": floor,
        "sdk_alone_plus_off_vs_off": (cpu("off") + floor) / cpu("off"),
        "sdk_alone_plus_off_vs_off_2026": (cpu("off-26") + floor) / cpu("off-26"),
        "traced_vs_off_gateway_cpu_at_16": cpu("traced") / cpu("off"),
        "traced_vs_off_gateway_cpu_at_16_2026": cpu("traced-26") / cpu("off-26"),
        "sampled_10pct_vs_off_gateway_cpu_at_16_2026": cpu("sampled-10%-26") / cpu("off-26"),
        "sampled_10pct_no_metrics_vs_off_gateway_cpu_at_16_2026": cpu("sampled-10%-no-metrics-26") / cpu("off-26"),
    }


# ---- 7. limits: one identity in a tight loop, another's latency beside it ------------------------------


async def bench_limits(quick: bool, use_wrk: bool) -> dict[str, Any]:
    """Identity B's latency at 1 in flight (2026-07-28, HTTP): alone; while identity A loops at 16 in
    flight, limited by ``[limits] rate``; and while A loops with no limits. The load is wrk's (the
    Python client stops at A's first 429)."""
    if not use_wrk:
        return {"skipped": "needs wrk: A's refused requests are counted by wrk only"}
    a, b = "bench-token-a-0123456789", "bench-token-b-0123456789"
    seconds = 2 if quick else 8
    with tempfile.TemporaryDirectory() as tmp:
        async with spawn([*UPSTREAM], {"SERVE": "http"}) as upstream:
            url = f"http://127.0.0.1:{int(await first_line(upstream))}/mcp"

            def config(name: str, limited: bool) -> Path:
                remote = {"transport": "streamable-http", "url": url, "protocol": "modern"}
                path = gateway_config(Path(tmp) / name, {"up": remote}, http=True)
                lines = [f"[[server.tokens]]\nname = {toml(n)}\ntoken = {toml(t)}" for n, t in (("a", a), ("b", b))]
                if limited:  # A at the default rate; B, a token with a rate of its own it never reaches
                    lines[1] += '\nrate = "100000/second"'
                    lines.append('[limits]\nrate = "100/second"')
                path.write_text(path.read_text() + "\n".join(lines) + "\n")
                return path

            async with (
                http_gateway(config("limited.toml", True)) as (limited_url, limited),
                http_gateway(config("open.toml", False)) as (open_url, unlimited),
            ):

                def measure(target: str, token: str, concurrency: int, pid: int) -> Awaitable[dict[str, Any]]:
                    return load_http(
                        target, "up__p00001", modern=True, use_wrk=True, concurrency=concurrency, total=0,
                        budget_s=seconds, cpu_of={"middle": pid}, headers={"Authorization": f"Bearer {token}"},
                    )  # fmt: skip

                rows: dict[str, Any] = {"B alone": await measure(limited_url, b, 1, limited.pid)}
                for label, target, pid in (
                    ("limited", limited_url, limited.pid),
                    ("no limits", open_url, unlimited.pid),
                ):
                    measured: dict[str, Any] = {}

                    async def loop_a(target: str = target, pid: int = pid, into: dict[str, Any] = measured) -> None:
                        into["A"] = await measure(target, a, 16, pid)

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(loop_a)
                        measured["B"] = await measure(target, b, 1, pid)
                    rows[f"B while A loops ({label})"] = measured["B"]
                    rows[f"A looping ({label})"] = measured["A"]
    return {
        "rows": [
            {"load": name, **{k: v for k, v in row.items() if k != "cpu_us_per_request"}} for name, row in rows.items()
        ],
        "b_p50_while_a_loops_limited_vs_alone": rows["B while A loops (limited)"]["p50_ms"] / rows["B alone"]["p50_ms"],
        "b_p50_while_a_loops_unlimited_vs_alone": rows["B while A loops (no limits)"]["p50_ms"]
        / rows["B alone"]["p50_ms"],
    }


# ---- 8. scale-out: sealed session ids, and a replica behind HAProxy -----------------------------------


async def bench_cluster(quick: bool, use_wrk: bool) -> dict[str, Any]:
    """Two replicas sharing ``[cluster] session_keys``. Gateway CPU per ``prompts/get`` on replica A for a
    session begun on A beside one begun on B (A resumes it from its sealed id), and, where HAProxy is
    installed, A's throughput through HAProxy (deploy/haproxy.cfg, A its only server) beside direct."""
    import shutil

    from gateway.cluster.session_ids import SessionIds

    upstream = stdio_upstream()
    cluster = ["[cluster]", 'session_keys = ["bench-session-key-of-32-characters!"]']
    seconds = 1 if quick else 8
    with tempfile.TemporaryDirectory() as tmp:
        configs = []
        for name in ("a", "b"):
            config = gateway_config(Path(tmp) / f"{name}.toml", {"up": upstream}, http=True)
            config.write_text(config.read_text() + "\n".join(cluster) + "\n")
            configs.append(config)
        async with http_gateway(configs[0]) as (a, process), http_gateway(configs[1]) as (b, _):

            def load(url: str, **extra: Any) -> Callable[[], Awaitable[dict[str, Any]]]:
                return partial(
                    load_http, url, "up__p00001", modern=False, use_wrk=use_wrk, concurrency=16,
                    total=500 if quick else 4000, budget_s=seconds, cpu_of={"middle": process.pid}, **extra,
                )  # fmt: skip

            measures = {"begun here": load(a), "begun on another replica": load(a, initialize_at=b)}
            balancer = shutil.which("haproxy")
            async with haproxy_in_front(balancer, a, Path(tmp)) as through:
                if through is not None:
                    measures["through HAProxy"] = load(through)
                measured = await in_rounds(measures, 1 if quick else ROUNDS)
    ids = SessionIds([b"k" * 32])
    sealed = ids.issue(protocol_version="2025-11-25", principal="p", capabilities={}, client_name="c", now=time.time())
    started = time.perf_counter()
    for _ in range(2000):
        ids.open(sealed, now=time.time())
    result: dict[str, Any] = {
        "rows": [{"session": name, **row} for name, row in measured.items()],
        "resumed_vs_local_gateway_cpu_at_16": measured["begun on another replica"]["cpu_us_per_request"]["middle"]
        / measured["begun here"]["cpu_us_per_request"]["middle"],
        "opening_a_sealed_id_us": (time.perf_counter() - started) / 2000 * 1e6,
    }
    if "through HAProxy" in measured:
        result["haproxy_vs_direct_rps_at_16"] = measured["through HAProxy"]["rps"] / measured["begun here"]["rps"]
    result.update(await listing_pages_shared_or_not(quick))
    return result


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


def haproxy_config(url: str, config: Path, *, checked: bool) -> tuple[int, Path]:
    """deploy/haproxy.cfg written to ``config`` with ``url``'s server as its one backend, on a free port:
    health-checked on /readyz (a gateway replica), or not at all (a plain relay to any server)."""
    port = free_port()
    backend = url.split("//", 1)[1].split("/", 1)[0]
    text = (ROOT / "deploy" / "haproxy.cfg").read_text().replace("bind :8080", f"bind 127.0.0.1:{port}")
    if not checked:
        text = text.replace("    option httpchk GET /readyz\n", "").replace("    http-check expect status 200\n", "")
    server = f"    server {'gateway1' if checked else 'upstream'} {backend}{' check' if checked else ''}\n"
    config.write_text(
        text.replace("    server-template gateway 3 gateway:8080 check resolvers dns init-addr none\n", server)
    )
    return port, config


@asynccontextmanager
async def haproxy_in_front(binary: str | None, url: str, directory: Path) -> AsyncIterator[str | None]:
    """deploy/haproxy.cfg with ``url``'s replica as its one server; None (nothing started) without haproxy."""
    if binary is None:
        yield None
        return
    port, config = haproxy_config(url, directory / "haproxy.cfg", checked=True)
    async with spawn([binary, "-db", "-f", str(config)]), httpx.AsyncClient() as http:
        with anyio.fail_after(60):  # until its health check has found the replica up
            while True:
                try:
                    if (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await anyio.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"


@asynccontextmanager
async def haproxy_relay(binary: str | None, url: str, directory: Path) -> AsyncIterator[tuple[str, int] | None]:
    """HAProxy relaying to ``url``'s server, deploy/haproxy.cfg's defaults (keep-alive, no checks): the
    floor beside the gateway, what a plain HTTP relay costs. Its URL and pid; None without haproxy."""
    if binary is None:
        yield None
        return
    port, config = haproxy_config(url, directory / "relay.cfg", checked=False)
    async with spawn([binary, "-db", "-f", str(config)]) as relay:
        with anyio.fail_after(30):
            while True:  # until it accepts connections
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp", relay.pid


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ---- report -------------------------------------------------------------------------------------------


def ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    def row(transport: str, target: str, concurrency: int) -> dict[str, Any]:
        return next(
            r for r in rows if (r["transport"], r["target"], r["concurrency"]) == (transport, target, concurrency)
        )

    def rps(transport: str, target: str, concurrency: int) -> float:
        return float(row(transport, target, concurrency)["rps"])

    def p50(transport: str, target: str) -> float:
        return float(row(transport, target, 1)["p50_ms"])

    def cpu(transport: str, target: str, process: str) -> float:
        return float(row(transport, target, 16)["cpu_us_per_request"][process])

    def over(part: float, whole: float) -> float:
        """A ratio, NaN where the whole is 0: a target that got no request through in a short run (a smoke
        run on a loaded machine) is said in the report, not a crash of the whole run."""
        return part / whole if whole else math.nan

    out = {}
    for transport in ("stdio", "http"):  # the gateway's own cost, next to the upstream server's
        for target in ("gateway", "gateway-26"):
            era = "_2026" if target.endswith("26") else ""
            ratio = over(cpu(transport, target, "middle"), cpu(transport, target, "upstream"))
            out[f"{transport}{era}_gateway_cpu_vs_upstream_cpu_at_16"] = ratio
    for transport in ("stdio", "http"):
        out[f"{transport}_gateway_vs_direct_rps_at_16"] = over(
            rps(transport, "gateway", 16), rps(transport, "direct", 16)
        )
        out[f"{transport}_gateway_vs_fastmcp_rps_at_16"] = over(
            rps(transport, "gateway", 16), rps(transport, "fastmcp", 16)
        )
        out[f"{transport}_added_p50_ms"] = p50(transport, "gateway") - p50(transport, "direct")
        out[f"{transport}_2026_gateway_vs_direct_rps_at_16"] = over(
            rps(transport, "gateway-26", 16), rps(transport, "direct-26", 16)
        )
    for target in ("relay", "relay-26"):  # over stdio: the floor of the gateway's own stdio transport
        if any((r["transport"], r["target"]) == ("stdio", target) for r in rows):
            era = "_2026" if target.endswith("26") else ""
            gateway = "gateway-26" if era else "gateway"
            own = cpu("stdio", gateway, "middle") - cpu("stdio", target, "middle")
            out[f"stdio{era}_gateway_own_cpu_us_at_16"] = own  # the gateway's CPU less the bare relay's
            out[f"stdio{era}_gateway_cpu_vs_relay_cpu_at_16"] = over(
                cpu("stdio", gateway, "middle"), cpu("stdio", target, "middle")
            )
    if any((r["transport"], r["target"]) == ("http", "relay") for r in rows):  # the floor of the libraries
        for target in ("relay", "relay-26"):
            era = "_2026" if target.endswith("26") else ""
            gateway = "gateway-26" if era else "gateway"
            out[f"http{era}_relay_cpu_vs_upstream_cpu_at_16"] = over(
                cpu("http", target, "middle"), cpu("http", target, "upstream")
            )
            out[f"http{era}_relay_vs_direct_rps_at_16"] = over(
                rps("http", target, 16), rps("http", "direct-26" if era else "direct", 16)
            )
            out[f"http{era}_relay_added_p50_ms"] = p50("http", target) - p50("http", "direct-26" if era else "direct")
            out[f"http{era}_gateway_cpu_vs_relay_cpu_at_16"] = over(
                cpu("http", gateway, "middle"), cpu("http", target, "middle")
            )
            out[f"http{era}_gateway_own_cpu_us_at_16"] = cpu("http", gateway, "middle") - cpu("http", target, "middle")
        out["http_2026_added_p50_ms"] = p50("http", "gateway-26") - p50("http", "direct-26")
    if any(r["target"] == "haproxy" for r in rows):  # the floor: what a plain relay costs, per request
        out["http_haproxy_cpu_vs_upstream_cpu_at_16"] = over(
            cpu("http", "haproxy", "middle"), cpu("http", "haproxy", "upstream")
        )
        out["http_gateway_cpu_vs_haproxy_cpu_at_16"] = over(
            cpu("http", "gateway", "middle"), cpu("http", "haproxy", "middle")
        )
    return out


def print_report(results: dict[str, Any]) -> None:
    head = f"{'transport':9} {'target':10} {'conc':>4} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>9} {'failed':>6}"
    print(f"\n{head} {'CPU µs/req: upstream':>20} {'proxy':>6}")
    for row in results.get("gets", ()):
        cpu = row.get("cpu_us_per_request", {})
        upstream_cpu = f"{cpu['upstream']:>20.0f}" if "upstream" in cpu else " " * 20
        middle_cpu = f"{cpu['middle']:>6.0f}" if "middle" in cpu else ""
        print(
            f"{row['transport']:9} {row['target']:10} {row['concurrency']:>4} {row['p50_ms']:>8.2f} "
            f"{row['p99_ms']:>8.2f} {row['rps']:>9.0f} {row.get('failed', 0):>6} {upstream_cpu} {middle_cpu}"
        )
    for section in ("ratios", "listing", "sessions", "startup", "auth", "telemetry", "limits", "cluster"):
        if section not in results:
            continue
        print(f"\n{section}:")
        for key, value in results[section].items():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, dict):
                    print(
                        "  "
                        + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in item.items())
                    )
                else:
                    print(f"  {key:45} {item:.3f}" if isinstance(item, float) else f"  {key:45} {item}")


SECTIONS = ("gets", "listing", "sessions", "startup", "auth", "telemetry", "limits", "cluster")


async def main_async(quick: bool, only: set[str], transports: set[str], use_wrk: bool) -> dict[str, Any]:
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "quick": quick}
    machine["http_load"] = WRK if use_wrk else "python client"
    results: dict[str, Any] = {"machine": machine}
    sections: dict[str, Callable[[], Awaitable[Any]]] = {
        "gets": lambda: bench_gets(quick, transports, use_wrk=use_wrk),
        "listing": lambda: bench_listing(quick),
        "sessions": lambda: bench_sessions(quick),
        "startup": lambda: bench_startup(quick),
        "auth": lambda: bench_auth(quick, use_wrk),
        "telemetry": lambda: bench_telemetry(quick, use_wrk),
        "limits": lambda: bench_limits(quick, use_wrk),
        "cluster": lambda: bench_cluster(quick, use_wrk),
    }
    for name, measure in sections.items():
        if name not in only:
            continue
        try:  # a section that cannot measure says so; the others still run
            results[name] = await measure()
        except Exception as exc:  # reported, not hidden: the run exits non-zero at the end
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(f"{name}: could not measure: {type(exc).__name__}: {exc}", file=sys.stderr)
    if isinstance(results.get("gets"), list) and transports == {"stdio", "http"}:
        results["ratios"] = ratios(results["gets"])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short smoke run (CI)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results.json"))
    parser.add_argument("--only", action="append", choices=SECTIONS, help="run only these sections (repeatable)")
    parser.add_argument("--transport", action="append", choices=["stdio", "http"], help="prompts/get transports")
    parser.add_argument(
        "--http-load", choices=["wrk", "python"], default="wrk", help="what makes the HTTP load (wrk if installed)"
    )
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = str(ROOT)
    sections, transports = set(args.only or SECTIONS), set(args.transport or ["stdio", "http"])
    # the client on uvloop where installed, as the gateway is: less of the cores taken by the load itself
    loop = {"use_uvloop": importlib.util.find_spec("uvloop") is not None}
    use_wrk = WRK is not None and args.http_load == "wrk"
    results = anyio.run(main_async, args.quick, sections, transports, use_wrk, backend_options=loop)
    print_report(results)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {args.out}")
    failed = [name for name, section in results.items() if isinstance(section, dict) and "error" in section]
    if failed:
        sys.exit(f"sections that could not measure: {', '.join(failed)}")


if __name__ == "__main__":
    main()
