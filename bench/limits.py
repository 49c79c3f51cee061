"""Section ``limits``: one identity in a tight loop, another's latency beside it, with ``[limits] rate``
and without.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import anyio

from bench.config import gateway_config, toml
from bench.processes import (
    UPSTREAM,
    first_line,
    http_gateway,
    spawn,
)
from bench.rounds import load_http


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
