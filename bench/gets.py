"""Section ``gets``: ``prompts/get`` latency and throughput over stdio and HTTP, direct to the upstream,
through this gateway, through FastMCP's proxy and beside bare relays (the floors), both protocol eras;
and the ratios between them the report leads with.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import Any

from bench.clients import StdioClient, children, load, stdio_client
from bench.config import PY, ROOT, gateway_config, stdio_upstream
from bench.processes import (
    UPSTREAM,
    first_line,
    haproxy_relay,
    http_gateway,
    spawn,
    wait_http,
)
from bench.rounds import ROUNDS, in_rounds, load_http


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
