"""The processes a benchmark measures and the services around them, started and waited for: the SDK
upstream, a gateway over HTTP, HAProxy in front of either, an OTLP sink. Every section starts its targets
with these, so each section says only what it measures.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from bench.config import PY, ROOT

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
