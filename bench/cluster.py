"""Section ``cluster``: scale-out, sealed session ids resumed on another replica, a replica behind HAProxy,
and listing pages shared through Redis or not.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.config import gateway_config, stdio_upstream
from bench.listing import listing_pages_shared_or_not
from bench.processes import (
    haproxy_in_front,
    http_gateway,
)
from bench.rounds import ROUNDS, in_rounds, load_http


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
