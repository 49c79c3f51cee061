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
import os
import platform
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from bench.auth import bench_auth
from bench.cluster import bench_cluster
from bench.config import ROOT
from bench.gets import bench_gets, ratios
from bench.limits import bench_limits
from bench.listing import bench_listing
from bench.rounds import WRK
from bench.sessions import bench_sessions
from bench.startup import bench_startup
from bench.telemetry import bench_telemetry


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
