"""Real components started by the tests (Debian packages): skipped with a reason where one is not
installed, unless ``REQUIRE_SERVICES=1`` (``.ci/run`` installs them and sets it), where that fails."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

HAPROXY_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "haproxy.cfg"


def require_binary(name: str, package: str) -> str:
    """The binary's path; a skip (or, under REQUIRE_SERVICES=1, a failure) naming the package otherwise."""
    path = shutil.which(name)
    if path is None:
        reason = f"{name} is not installed (Debian package {package}; .ci/run installs it)"
        if os.environ.get("REQUIRE_SERVICES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def free_port() -> int:
    """A port free at the time of asking, for a program that cannot be told to pick one and say which."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Proxy:
    url: str
    log: list[str] = field(default_factory=list)
    _arrived: anyio.Event = field(default_factory=anyio.Event)

    def add(self, line: str) -> None:
        self.log.append(line)
        self._arrived.set()
        self._arrived = anyio.Event()

    def requests(self) -> list[str]:
        """What the proxy was asked for, e.g. ``POST http://127.0.0.1:8000/mcp`` or ``CONNECT 127.0.0.1:8443``."""
        return [
            line.split("): ", 1)[1].rsplit(" HTTP/", 1)[0] for line in self.log if "Request (file descriptor" in line
        ]

    async def wait_for_request(self, request: str, timeout: float = 20) -> None:
        with anyio.fail_after(timeout):
            while request not in self.requests():
                await self._arrived.wait()


@asynccontextmanager
async def tinyproxy(directory: Path) -> AsyncIterator[Proxy]:
    """A real forward proxy (tinyproxy, in the foreground, logging each request to stdout)."""
    binary = require_binary("tinyproxy", "tinyproxy")
    port = free_port()
    config = directory / "tinyproxy.conf"
    config.write_text(
        f"Port {port}\nListen 127.0.0.1\nTimeout 600\nLogLevel Info\nMaxClients 100\nAllow 127.0.0.1\n"
        "DisableViaHeader Yes\n"
    )
    proxy = Proxy(f"http://127.0.0.1:{port}")
    async with await anyio.open_process([binary, "-d", "-c", str(config)]) as process:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(10):
            while "Accepting connections" not in (line := (await lines.receive_until(b"\n", 65536)).decode()):
                proxy.add(line)

        async def collect() -> None:
            with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.IncompleteRead):
                while True:
                    proxy.add((await lines.receive_until(b"\n", 65536)).decode())

        async with anyio.create_task_group() as tg:
            tg.start_soon(collect)
            try:
                yield proxy
            finally:
                process.terminate()
                tg.cancel_scope.cancel()


async def _accepting(port: int, timeout: float = 20) -> None:
    """Until something accepts connections on the port (for programs that say nothing when ready)."""
    with anyio.fail_after(timeout):
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.05)
                continue
            await stream.aclose()
            return


@dataclass
class Redis:
    url: str
    port: int
    process: anyio.abc.Process | None = None


@asynccontextmanager
async def redis_server(port: int | None = None) -> AsyncIterator[Redis]:
    """A real Redis (Debian redis-server) on loopback, no persistence; stopped on exit."""
    binary = require_binary("redis-server", "redis-server")
    port = port or free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    async with await anyio.open_process(command) as process:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(20):
            while b"Ready to accept connections" not in await lines.receive_until(b"\n", 65536):
                pass
        try:
            yield Redis(f"redis://127.0.0.1:{port}/0", port, process)
        finally:
            if process.returncode is None:
                process.kill()


@asynccontextmanager
async def haproxy(directory: Path, backends: list[str]) -> AsyncIterator[str]:
    """A real HAProxy (Debian haproxy) spreading requests round-robin over ``backends`` (``host:port``), no
    affinity, with health checks on /readyz; yields its base URL. The configuration is the one in
    deploy/haproxy.cfg with these backends."""
    binary = require_binary("haproxy", "haproxy")
    port = free_port()
    template = await anyio.Path(HAPROXY_CONFIG).read_text()
    servers = "\n".join(f"    server gateway{i} {backend} check" for i, backend in enumerate(backends, 1))
    config = directory / "haproxy.cfg"
    config.write_text(
        template.replace("bind :8080", f"bind 127.0.0.1:{port}")
        .replace("    server-template gateway 3 gateway:8080 check resolvers dns init-addr none\n", servers + "\n")
        .replace("inter 2s", "inter 300ms")
    )
    async with await anyio.open_process([binary, "-db", "-f", str(config)]) as process:
        try:
            await _accepting(port)
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
