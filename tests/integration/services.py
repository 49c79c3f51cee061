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
