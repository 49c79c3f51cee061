"""Load in rounds, the targets taking turns, the median of each reported: how every section that compares
targets under load measures them, so a slow spell on the shared machine hits every target alike.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from bench.clients import http_client, load, wrk_load, wrk_version

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
