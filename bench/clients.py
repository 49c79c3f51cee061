"""Lean benchmark clients: the same code drives every target, so client overhead is equal for all."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import httpx

from gateway.rpc import RpcPeer
from gateway.transports.stdio import ChildSpec, open_child

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"},
}


def _enveloped(params: dict[str, Any] | None) -> dict[str, Any]:
    """A 2026-07-28 request's params: no handshake, the version and capabilities on every request."""
    return {**(params or {}), "_meta": ENVELOPE}


class Client(Protocol):
    async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]: ...


@asynccontextmanager
async def stdio_client(
    command: Sequence[str], env: Mapping[str, str] | None = None, *, modern: bool = False
) -> AsyncIterator[Client]:
    spec = ChildSpec(command[0], tuple(command[1:]), env or {})
    async with open_child(spec, on_stderr_line=lambda line: None) as (stream, _), anyio.create_task_group() as tg:
        peer = RpcPeer(stream)
        tg.start_soon(peer.run)

        class _Stdio:
            async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
                return await peer.request(method, _enveloped(params) if modern else params, timeout=60)

        if not modern:
            await peer.request("initialize", INIT, timeout=60)
            await peer.notify("notifications/initialized")
        yield _Stdio()
        tg.cancel_scope.cancel()


def _json_of(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data: ") and '"id"' in line:
                return json.loads(line[6:])  # type: ignore[no-any-return]
        raise RuntimeError("no answer in the event stream")
    return response.json()  # type: ignore[no-any-return]


@asynccontextmanager
async def http_client(url: str, *, modern: bool = False) -> AsyncIterator[Client]:
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if modern:
            yield _ModernHttp(http, url, headers)
            return
        response = await http.post(
            url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT}, headers=headers
        )
        if "mcp-session-id" in response.headers:
            headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        headers["MCP-Protocol-Version"] = "2025-11-25"
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        ids = iter(range(1, 1 << 62))

        class _Http:
            async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
                body = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params or {}}
                answer = _json_of(await http.post(url, json=body, headers=headers))
                if "error" in answer:
                    raise RuntimeError(answer["error"])
                return answer["result"]  # type: ignore[no-any-return]

        yield _Http()


class _ModernHttp:
    """2026-07-28 over HTTP: each request one POST, its headers mirroring the body."""

    def __init__(self, http: httpx.AsyncClient, url: str, headers: dict[str, str]) -> None:
        self._http, self._url, self._headers = http, url, {**headers, "MCP-Protocol-Version": "2026-07-28"}
        self._ids = iter(range(1, 1 << 62))

    async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        headers = {**self._headers, "Mcp-Method": method}
        if method == "prompts/get":
            headers["Mcp-Name"] = (params or {})["name"]
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": _enveloped(params)}
        answer = _json_of(await self._http.post(self._url, json=body, headers=headers))
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer["result"]  # type: ignore[no-any-return]


async def load(client: Client, name: str, *, concurrency: int, total: int, budget_s: float = 15) -> dict[str, float]:
    """``total`` prompts/get calls (or as many as ``budget_s`` allows), ``concurrency`` at a time:
    p50/p99 latency (ms) and throughput (req/s)."""
    latencies: list[float] = []
    remaining = total
    deadline = time.perf_counter() + budget_s

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0 and time.perf_counter() < deadline:
            remaining -= 1
            started = time.perf_counter()
            await client.request("prompts/get", {"name": name, "arguments": {"topic": "benchmarks"}})
            latencies.append(time.perf_counter() - started)

    for _ in range(max(1, total // 20)):  # warm-up: caches, JIT-free paths, connection pools
        await client.request("prompts/get", {"name": name, "arguments": {"topic": "warm-up"}})
    started = time.perf_counter()
    deadline = started + budget_s
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "rps": len(latencies) / elapsed,
    }
