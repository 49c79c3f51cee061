"""Section ``telemetry``: what tracing costs the gateway, every request traced or one in ten sampled,
beside tracing off and beside the OpenTelemetry SDK's own floor.
"""

from __future__ import annotations

import json
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from bench.config import PY, gateway_config, toml
from bench.processes import (
    UPSTREAM,
    first_line,
    http_gateway,
    otlp_sink,
    spawn,
)
from bench.rounds import ROUNDS, in_rounds, load_http


async def bench_telemetry(quick: bool, use_wrk: bool) -> dict[str, Any]:
    """Gateway CPU per ``prompts/get`` over HTTP at 16 in flight with ``[telemetry]`` on, every request
    sampled (a SERVER and a CLIENT span each, the duration histograms, OTLP export), beside off, same run,
    both eras; and with one trace in ten sampled (2026-07-28), with and without the histograms (what an
    unsampled request still costs is mostly theirs). Beside them, the floors: the SDK alone in a loop
    (``bench/otel_floor.py``), and in situ, the bare relay with the SDK used plainly around each request
    (``bench/traced_relay.py``), every request traced and one in ten, against the bare relay itself."""
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

            def relay(*traced: str) -> list[str]:
                """The bare relay, or (``traced``: sample ratio, metrics) the SDK used plainly around it."""
                if not traced:
                    return [PY, "-m", "bench.relay", url]
                return [PY, "-m", "bench.traced_relay", url, sink, *traced]

            async with (
                spawn(relay()) as relay_off,
                spawn(relay("1.0", "true")) as relay_traced,
                spawn(relay("0.1", "true")) as relay_tenth,
                http_gateway(config("off.toml", "legacy", sampled=None)) as (off_url, off),
                http_gateway(config("on.toml", "legacy", sampled=1.0)) as (on_url, on),
                http_gateway(config("off26.toml", "modern", sampled=None)) as (off26_url, off26),
                http_gateway(config("on26.toml", "modern", sampled=1.0)) as (on26_url, on26),
                http_gateway(config("tenth26.toml", "modern", sampled=0.1)) as (tenth26_url, tenth26),
                http_gateway(config("bare26.toml", "modern", sampled=0.1, metrics=False)) as (bare26_url, bare26),
            ):
                targets = {  # name: (URL, process, 2026-07-28, the prompt's name there)
                    "off": (off_url, off, False, "up__p00001"),
                    "traced": (on_url, on, False, "up__p00001"),
                    "off-26": (off26_url, off26, True, "up__p00001"),
                    "traced-26": (on26_url, on26, True, "up__p00001"),
                    "sampled-10%-26": (tenth26_url, tenth26, True, "up__p00001"),
                    "sampled-10%-no-metrics-26": (bare26_url, bare26, True, "up__p00001"),
                } | {
                    name: (f"http://127.0.0.1:{int(await first_line(process))}/mcp", process, True, "p00001")
                    for name, process in (
                        ("relay-26", relay_off),
                        ("relay-traced-26", relay_traced),
                        ("relay-sampled-10%-26", relay_tenth),
                    )
                }
                measures = {
                    name: partial(
                        load_http, target_url, prompt, modern=modern, use_wrk=use_wrk, concurrency=16,
                        total=500 if quick else 4000, budget_s=seconds,
                        cpu_of={"upstream": upstream.pid, "middle": process.pid},
                    )
                    for name, (target_url, process, modern, prompt) in targets.items()
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
        # the same SDK work where the gateway's runs (the relay between client and upstream): what it adds
        # to the bare relay, added to the gateway's off, is the floor in situ
        "sdk_in_relay_traced_cpu_us_per_request": cpu("relay-traced-26") - cpu("relay-26"),
        "sdk_in_relay_plus_off_vs_off_2026": (cpu("off-26") + cpu("relay-traced-26") - cpu("relay-26")) / cpu("off-26"),
        "sdk_in_relay_sampled_10pct_cpu_us_per_request": cpu("relay-sampled-10%-26") - cpu("relay-26"),
        "sdk_in_relay_sampled_10pct_plus_off_vs_off_2026": (
            cpu("off-26") + cpu("relay-sampled-10%-26") - cpu("relay-26")
        )
        / cpu("off-26"),
    }
