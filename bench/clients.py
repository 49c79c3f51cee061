"""Lean benchmark clients: the same code drives every target, so client overhead is equal for all."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol, cast

import anyio
import httpx

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


class HttpClient(Client, Protocol):
    def wire(self, method: str, params: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, Any]]:
        """The headers and JSON-RPC params of the POST that ``request`` would send."""
        ...


class StdioClient(Client, Protocol):
    pid: int  # the process the client started (a server, or a proxy with the server as its child)


class _Answers(asyncio.SubprocessProtocol):
    """The child's stdout, split into lines, each JSON-RPC answer settling its request's future: the load
    shares the two cores with the servers it measures, so it is kept lean (an asyncio protocol, no task
    or stream layer; less than half the CPU per request of the gateway's own RPC peer as the client)."""

    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.exited = asyncio.get_running_loop().create_future()
        self._partial = b""

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd != 1:
            return
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            message: dict[str, Any] = json.loads(line) if line.strip() else {}
            future = self.waiting.pop(message.get("id", 0), None) if "method" not in message else None
            if future is not None and not future.done():
                future.set_result(message)

    def process_exited(self) -> None:
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(RuntimeError("the server exited"))
        if not self.exited.done():
            self.exited.set_result(None)


@asynccontextmanager
async def stdio_client(
    command: Sequence[str], env: Mapping[str, str] | None = None, *, modern: bool = False
) -> AsyncIterator[StdioClient]:
    loop = asyncio.get_running_loop()
    transport, answers = await loop.subprocess_exec(
        _Answers,
        *command,
        env={**os.environ, **(env or {})},
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    stdin = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
    ids = itertools.count(1)

    class _Stdio:
        pid = transport.get_pid()

        async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            request_id = next(ids)
            answer = answers.waiting[request_id] = loop.create_future()
            body = {"jsonrpc": "2.0", "id": request_id, "method": method}
            body["params"] = _enveloped(params) if modern else (params or {})
            stdin.write(json.dumps(body).encode() + b"\n")
            message = await answer
            if "error" in message:
                raise RuntimeError(message["error"])
            return message["result"]  # type: ignore[no-any-return]

    try:
        client = _Stdio()
        if not modern:
            await client.request("initialize", INIT)
            stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        yield client
    finally:
        transport.terminate()
        try:
            await asyncio.wait_for(asyncio.shield(answers.exited), 10)
        except TimeoutError:
            transport.kill()
        transport.close()


def _json_of(content_type: str | None, body: bytes) -> dict[str, Any]:
    if (content_type or "").startswith("text/event-stream"):
        for line in body.decode().splitlines():
            if line.startswith("data: ") and '"id"' in line:
                return json.loads(line[6:])  # type: ignore[no-any-return]
        raise RuntimeError("no answer in the event stream")
    return json.loads(body)  # type: ignore[no-any-return]


class _Post:
    """POSTs on httpx, for every target alike (wrk makes the HTTP load where it is installed; this is the
    stand-in where it is not, and costs the shared cores more)."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
        self._client = httpx.AsyncClient(timeout=60, limits=limits)
        self._url = url
        self.headers = headers
        self._ids = iter(range(1, 1 << 62))

    async def call(
        self, method: str, params: dict[str, Any] | None, _url: str | None = None, **extra: str
    ) -> tuple[dict[str, Any], str | None]:
        request = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or {}}
        try:
            answer = await self._client.post(
                _url or self._url, content=json.dumps(request), headers={**self.headers, **extra}
            )
        except httpx.HTTPError as exc:
            raise RuntimeError(str(exc) or type(exc).__name__) from exc
        message = _json_of(answer.headers.get("content-type"), answer.content)
        if "error" in message:
            raise RuntimeError(message["error"])
        return message["result"], answer.headers.get("mcp-session-id")

    async def notify(self, method: str) -> None:
        body = json.dumps({"jsonrpc": "2.0", "method": method})
        await self._client.post(self._url, content=body, headers=self.headers)

    async def aclose(self) -> None:
        await self._client.aclose()


@asynccontextmanager
async def http_client(
    url: str, *, modern: bool = False, headers: Mapping[str, str] | None = None, initialize_at: str | None = None
) -> AsyncIterator[HttpClient]:
    """A client of ``url``'s session (or stateless, ``modern``), sending ``headers`` with every request;
    ``initialize_at``: the session begins at that URL (another replica), then goes on at ``url``."""
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    post = _Post(url, {**base, **(headers or {})})
    try:
        if modern:
            post.headers["MCP-Protocol-Version"] = "2026-07-28"
            yield _ModernHttp(post)
            return
        _, session = await post.call("initialize", INIT, _url=initialize_at or url)
        if session is not None:
            post.headers["Mcp-Session-Id"] = session
        post.headers["MCP-Protocol-Version"] = "2025-11-25"
        await post.notify("notifications/initialized")

        class _Http:
            async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
                return (await post.call(method, params))[0]

            def wire(self, method: str, params: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, Any]]:
                return dict(post.headers), params or {}

        yield _Http()
    finally:
        await post.aclose()


class _ModernHttp:
    """2026-07-28 over HTTP: each request one POST, its headers mirroring the body."""

    def __init__(self, post: _Post) -> None:
        self._post = post

    async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        headers, enveloped = self.wire(method, params)
        return (await self._post.call(method, enveloped, **headers))[0]

    def wire(self, method: str, params: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, Any]]:
        headers = {**self._post.headers, "Mcp-Method": method}
        if method == "prompts/get":
            headers["Mcp-Name"] = (params or {})["name"]
        return headers, _enveloped(params)


def children(pid: int) -> list[int]:
    """A process's children (Linux ``/proc``): the upstream a stdio proxy started."""
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def cpu_seconds(pid: int) -> float:
    """CPU time a process's threads have used (Linux ``/proc``), to the nanosecond: each thread's
    ``schedstat`` (``/proc/PID/stat`` counts in 10 ms ticks, ±3% of a round's CPU over stdio). A thread
    that ended is no longer counted; the processes measured keep theirs for the run. Where the kernel
    keeps no ``schedstat``, the ticks."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue  # (the thread ended while the others were read)
    except FileNotFoundError:
        total = 0
    if total:
        return total / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load(
    client: Client,
    name: str,
    *,
    concurrency: int,
    total: int,
    budget_s: float = 15,
    cpu_of: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """``total`` prompts/get calls (or as many as ``budget_s`` allows), ``concurrency`` at a time:
    p50/p99 latency (ms) and throughput (req/s); with ``cpu_of`` (name → pid), also the CPU time each of
    those processes spent per request (µs). On a shared machine CPU per request varies far less than
    throughput, which depends on how the cores happened to be shared."""
    latencies: list[float] = []
    failures: list[str] = []
    remaining = total
    deadline = time.perf_counter() + budget_s

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0 and time.perf_counter() < deadline:
            remaining -= 1
            started = time.perf_counter()
            try:
                await client.request("prompts/get", {"name": name, "arguments": {"topic": "benchmarks"}})
            except RuntimeError as exc:  # counted and reported, not hidden
                failures.append(type(exc).__name__)
                continue
            latencies.append(time.perf_counter() - started)

    for _ in range(max(1, total // 20)):  # warm-up: caches, JIT-free paths, connection pools
        await client.request("prompts/get", {"name": name, "arguments": {"topic": "warm-up"}})
    cpu_before = cpu_snapshot(cpu_of)
    started = time.perf_counter()
    deadline = started + budget_s
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    elapsed = time.perf_counter() - started
    latencies.sort()
    done = max(1, len(latencies) + len(failures))
    measured: dict[str, Any] = {
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "rps": len(latencies) / elapsed,
        "failed": len(failures),
    }
    if cpu_of:
        measured["cpu_us_per_request"] = cpu_per_request(cpu_of, cpu_before, done)
    return measured


def cpu_snapshot(processes: Mapping[str, int] | None) -> dict[str, float]:
    return {label: cpu_seconds(pid) for label, pid in (processes or {}).items()}


def cpu_per_request(processes: Mapping[str, int], before: Mapping[str, float], done: int) -> dict[str, float]:
    """Each process's CPU time since ``before`` (a ``cpu_snapshot``), in µs per request of ``done``."""
    return {label: (cpu_seconds(pid) - before[label]) * 1e6 / done for label, pid in processes.items()}


WRK_SCRIPT = Path(__file__).with_name("wrk_post.lua")


async def quiet(processes: Mapping[str, int], *, timeout_s: float = 60) -> None:
    """Until none of the processes used more than 2 ms of CPU in 100 ms (or ``timeout_s``): idle, but for
    timers."""
    with anyio.move_on_after(timeout_s):
        while True:
            before = [cpu_seconds(pid) for pid in processes.values()]
            await anyio.sleep(0.1)
            after = [cpu_seconds(pid) for pid in processes.values()]
            if all(now - then < 0.002 for now, then in zip(after, before, strict=True)):
                return


def wrk_version() -> str | None:
    """wrk (Debian package ``wrk``) if installed: a load generator in C, so the client's CPU does not come
    out of the two cores the gateway shares with its upstream (the Python client needs ~140 µs a request,
    wrk ~35). None means the Python client is used instead."""
    path = shutil.which("wrk")
    if path is None:
        return None
    banner = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    return banner.split(" [")[0] or "wrk"


async def wrk_load(
    client: HttpClient,
    url: str,
    name: str,
    *,
    concurrency: int,
    seconds: int,
    cpu_of: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """``load``'s measures, the load made by wrk: ``concurrency`` connections, each sending the POST that
    ``client`` would send (its session, its headers) with fresh ids, for ``seconds``."""
    params = {"name": name, "arguments": {"topic": "benchmarks"}}
    headers, wire_params = client.wire("prompts/get", params)
    template = {"jsonrpc": "2.0", "id": "__ID__", "method": "prompts/get", "params": wire_params}
    env = {
        **os.environ,
        "BODY": json.dumps(template).replace('"__ID__"', "__ID__"),
        "HEADERS": "\n".join(f"{key}: {value}" for key, value in headers.items()),
    }
    for _ in range(20):  # warm-up, as ``load`` does
        await client.request("prompts/get", params)
    # A request unanswered within the timeout is a failure: with a timeout past the run's length, a server
    # that hangs read "0 req/s, 0 failed"
    timeout = f"{max(1, min(5, int(seconds / 2)))}s"
    command = ["wrk", "-t1", f"-c{concurrency}", f"-d{seconds}s", "--timeout", timeout, "-s", str(WRK_SCRIPT), url]
    cpu_before = cpu_snapshot(cpu_of)
    finished = await anyio.run_process(command, env=env)
    summary = json.loads(finished.stdout.decode().strip().splitlines()[-1])
    # wrk stops with a request in flight on every connection; the servers still do that work, so it is
    # waited for (else it would land in the next target's measure) and counted in the CPU per request
    await quiet(cpu_of or {})
    done = summary["requests"] + concurrency
    measured: dict[str, Any] = {
        "p50_ms": summary["p50_us"] / 1000,
        "p99_ms": summary["p99_us"] / 1000,
        "rps": (summary["requests"] - summary["failed"]) / (summary["duration_us"] / 1e6),
        # nothing answered at all: every connection's request is a failure (wrk counts none it never saw end)
        "failed": summary["failed"] if summary["requests"] else max(summary["failed"], concurrency),
    }
    if cpu_of:
        measured["cpu_us_per_request"] = cpu_per_request(cpu_of, cpu_before, done)
    return measured
