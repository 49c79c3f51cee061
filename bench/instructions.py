"""Instructions per relayed ``prompts/get`` over HTTP, counted by callgrind in the process between the
client and the SDK upstream (the gateway, or the bare relay): on a shared machine CPU time varies with
the load, instruction counts hardly at all, so a change to the hot path is compared with these.

Usage: ``python -m bench.instructions TARGET [REQUESTS]``, TARGET one of ``gateway``, ``gateway-26``,
``relay``, ``relay-26``, ``sampled-26`` (``sample_ratio = 0.1``), ``dropped-26`` (``sample_ratio = 0``,
no histograms), ``traced-26`` (every request); over stdio ``stdio-gateway``, ``stdio-gateway-26``, and
the bare stdio relay ``stdio-relay``, ``stdio-relay-26`` (``bench/stdio_relay.py``), the upstream their
child. One request at a time (more in flight batches the
loop's work differently from run to run); what the process does while idle for the same time is
counted apart and taken off. Needs valgrind (``apt-get install valgrind``). Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from bench.clients import ENVELOPE, INIT, stdio_client
from bench.config import PY, ROOT, gateway_config, stdio_upstream, toml

TELEMETRY = {"sampled-26": (0.1, True), "dropped-26": (0.0, False), "traced-26": (1.0, True)}


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


def otlp_sink() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def start_middle(target: str, upstream_url: str, directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    callgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={directory}/cg.%p", "-q"]
    if target.startswith("relay"):
        relay = subprocess.Popen([*callgrind, PY, "-m", "bench.relay", upstream_url], stdout=subprocess.PIPE, cwd=ROOT)
        assert relay.stdout is not None
        return relay, f"http://127.0.0.1:{int(relay.stdout.readline())}/mcp"
    remote = {"transport": "streamable-http", "url": upstream_url, "protocol": "modern" if "26" in target else "legacy"}
    config = gateway_config(directory / "g.toml", {"up": remote}, http=True)
    if target in TELEMETRY:
        ratio, metrics = TELEMETRY[target]
        settings = f"enabled = true\nendpoint = {toml(otlp_sink())}\nsample_ratio = {ratio}\nmetrics = {toml(metrics)}"
        config.write_text(config.read_text() + f"[telemetry]\n{settings}\n")
    command = [*callgrind, PY, "-m", "gateway", "serve", "--config", str(config), "--log-level", "info"]
    gateway = subprocess.Popen(command, stderr=subprocess.PIPE, cwd=ROOT)
    assert gateway.stderr is not None
    while True:
        event = json.loads(gateway.stderr.readline())
        if event.get("event") == "http_listening":
            break
    stderr = gateway.stderr
    threading.Thread(target=lambda: [None for _ in stderr], daemon=True).start()
    return gateway, str(event["url"])


def callgrind(pid: int, *options: str) -> None:
    subprocess.run([shutil.which("callgrind_control") or "callgrind_control", *options, str(pid)], capture_output=True)


async def drive(url: str, pid: int, *, modern: bool, name: str, requests: int) -> tuple[float, float]:
    """Seconds of idle counting, then seconds of load counting (each a callgrind dump)."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    params: dict[str, Any] = {"name": name, "arguments": {"topic": "benchmarks"}}
    async with httpx.AsyncClient(timeout=600) as client:
        if modern:
            headers |= {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/get", "Mcp-Name": name}
            params["_meta"] = ENVELOPE
        else:
            opened = await client.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT})
            if "mcp-session-id" in opened.headers:
                headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
            headers["MCP-Protocol-Version"] = "2025-11-25"
            await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)

        async def one(request_id: int) -> bool:
            body = {"jsonrpc": "2.0", "id": request_id, "method": "prompts/get", "params": params}
            return b'"result"' in (await client.post(url, json=body, headers=headers)).content

        for attempt in range(600):  # until the upstream is up
            if await one(attempt):
                break
            await asyncio.sleep(0.5)
        for request_id in range(60):  # warm
            await one(request_id)
        callgrind(pid, "-i", "on")
        started = time.time()
        await asyncio.sleep(4)
        callgrind(pid, "-d")
        idle = time.time() - started
        started = time.time()
        for request_id in range(requests):
            if not await one(request_id):
                raise RuntimeError("a request failed")
        await asyncio.sleep(1)
        callgrind(pid, "-i", "off")
        callgrind(pid, "-d")
        return idle, time.time() - started


async def drive_stdio(target: str, directory: Path, requests: int) -> tuple[int, float, float]:
    """Over stdio: the middle (gateway or bare relay) under callgrind, its upstream a child it starts.
    Its pid, then seconds of idle counting and of load counting."""
    modern = target.endswith("26")
    if "relay" in target:
        middle, name = [PY, "-m", "bench.stdio_relay", PY, "-m", "bench.upstream"], "p00001"
    else:
        upstream = {**stdio_upstream(), "protocol": "modern" if modern else "legacy"}
        config = gateway_config(directory / "g.toml", {"up": upstream}, http=False)
        middle = [PY, "-m", "gateway", "serve", "--config", str(config), "--log-level", "info"]
        name = "up__p00001"
    callgrind_run = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={directory}/cg.%p"]
    async with stdio_client([*callgrind_run, "-q", *middle], {"PYTHONPATH": str(ROOT)}, modern=modern) as client:

        async def one() -> None:
            await client.request("prompts/get", {"name": name, "arguments": {"topic": "benchmarks"}})

        for _ in range(60):  # warm
            await one()
        callgrind(client.pid, "-i", "on")
        started = time.time()
        await asyncio.sleep(4)
        callgrind(client.pid, "-d")
        idle = time.time() - started
        started = time.time()
        for _ in range(requests):
            await one()
        await asyncio.sleep(1)
        callgrind(client.pid, "-i", "off")
        callgrind(client.pid, "-d")
        return client.pid, idle, time.time() - started


def totals(path: Path) -> int:
    return int([line for line in path.read_text().splitlines() if line.startswith("totals:")][-1].split()[1])


def main() -> None:
    target, requests = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 300
    directory = Path(tempfile.mkdtemp(prefix="bench-instructions-"))
    if target.startswith("stdio-"):
        pid, idle_s, load_s = asyncio.run(drive_stdio(target, directory, requests))
        report(target, requests, directory, pid, idle_s, load_s)
        return
    upstream = subprocess.Popen(
        [PY, "-m", "bench.upstream"], env={**os.environ, "SERVE": "http"}, stdout=subprocess.PIPE, cwd=ROOT
    )
    assert upstream.stdout is not None
    try:
        middle, url = start_middle(target, f"http://127.0.0.1:{int(upstream.stdout.readline())}/mcp", directory)
        try:
            name = "p00001" if target.startswith("relay") else "up__p00001"
            idle_s, load_s = asyncio.run(drive(url, middle.pid, modern="26" in target, name=name, requests=requests))
        finally:
            middle.terminate()
            middle.wait(30)
    finally:
        upstream.terminate()
    report(target, requests, directory, middle.pid, idle_s, load_s)


def report(target: str, requests: int, directory: Path, pid: int, idle_s: float, load_s: float) -> None:
    idle, load = (totals(directory / f"cg.{pid}.{n}") for n in (1, 2))
    idle_taken = idle / idle_s * load_s
    per_request = (load - idle_taken) / requests
    result = {"target": target, "requests": requests, "instructions_per_request": round(per_request)}
    # the idle work taken off, as a share of the load's count: large, and the count depends on the wall time
    print(json.dumps(result | {"idle_share": round(idle_taken / load, 3)}))


if __name__ == "__main__":
    main()
