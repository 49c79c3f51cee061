"""Starting the real gateway with real SDK upstream servers, configured through a real TOML file."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp.types as t
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]


class ListChangedWatcher:
    """An SDK ``message_handler`` that counts ``notifications/prompts/list_changed`` (or ``kind``, say
    ``t.ToolListChangedNotification``) and lets a test await the next."""

    def __init__(self, kind: type[object] = t.PromptListChangedNotification) -> None:
        self.count = 0
        self._kind = kind
        self._changed = anyio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, self._kind):
            self.count += 1
            self._changed.set()

    async def wait(self, timeout: float = 20) -> None:
        with anyio.fail_after(timeout):
            await self._changed.wait()
        self._changed = anyio.Event()


def sdk_upstream(namespace: str, module: str, **extra: Any) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-m", f"tests.servers.{module}"],
        "cwd": str(ROOT),
        "timeout_s": 20,
        **extra,
    }


def _toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)  # strings, numbers, booleans and lists of them are the same in TOML


def write_config(
    path: Path,
    upstreams: list[dict[str, Any]],
    *,
    gateway: dict[str, Any] | None = None,
    policy: dict[str, Any] | None = None,
    server: dict[str, Any] | None = None,
    tokens: list[dict[str, Any]] | None = None,
    cluster: dict[str, Any] | None = None,
    telemetry: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
) -> Path:
    # The first requests wait for upstreams still starting (an event, bounded): generously here, so that a
    # loaded machine's slow start is waited for rather than failed (the product's default is 5 s).
    gateway = {"startup_wait_s": 60, **(gateway or {})}
    lines = ["[gateway]"] + [f"{k} = {_toml_value(v)}" for k, v in gateway.items()]
    lines += ["[server]"] + [f"{k} = {_toml_value(v)}" for k, v in (server or {"transport": "stdio"}).items()]
    for upstream in upstreams:
        lines.append("[[upstreams]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in upstream.items()]
    for token in tokens or ():
        lines.append("[[server.tokens]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in token.items()]
    if cluster:
        lines.append("[cluster]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in cluster.items()]
    if limits:
        lines.append("[limits]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in limits.items()]
    if telemetry:
        lines.append("[telemetry]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in telemetry.items()]
    if policy:
        lines.append("[policy]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in policy.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def gateway_command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gateway", *extra, "--config", str(config)]


def gateway_params(config: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway", "serve", "--config", str(config), "--log-level", "warning"],
        cwd=str(ROOT),
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", str(ROOT)),
            "XDG_CACHE_HOME": os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")),
        },
    )


def process_gone(pid: int) -> bool:
    """Exited (a zombie waiting for a reaper counts: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


class Gate:
    """A named pipe a gated upstream (``tests/servers/gated.py``) waits at before it may start: what the
    gateway does before ``open`` happened before the server even ran, whatever the machine's load."""

    def __init__(self, directory: Path, name: str = "gate") -> None:
        self.path = directory / f"{name}.fifo"
        os.mkfifo(self.path)

    def upstream(self, namespace: str, command: list[str], **extra: Any) -> dict[str, Any]:
        """An upstream running ``command`` once the gate is opened."""
        args = ["-m", "tests.servers.gated", str(self.path), *command]
        return {"namespace": namespace, "command": sys.executable, "args": args, "cwd": str(ROOT), **extra}

    async def open(self) -> None:
        """Let the server start: returns once its wrapper, waiting at the gate, has gone through."""
        with anyio.fail_after(30):
            fd = await anyio.to_thread.run_sync(os.open, str(self.path), os.O_WRONLY, abandon_on_cancel=True)
        os.close(fd)


def demo_upstream(namespace: str, module: str, **extra: Any) -> dict[str, Any]:
    """A demo server shipped in the package: starts fast (no SDK import)."""
    return {"namespace": namespace, "command": sys.executable, "args": ["-m", f"gateway.demo.{module}"], **extra}


@asynccontextmanager
async def http_upstream(
    module: str, transport: str, *, port: int = 0, env: dict[str, str] | None = None, scheme: str = "http"
) -> AsyncIterator[str]:
    """A test server served over HTTP in its own process; yields its URL once it accepts connections.
    ``env`` selects what ``tests/servers/http_serve.py`` documents (redirects, TLS)."""
    command = [sys.executable, "-m", "tests.servers.http_serve", module, transport, str(port)]
    async with await anyio.open_process(command, cwd=ROOT, env={**os.environ, **(env or {})}) as process:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        with anyio.fail_after(20):
            bound = int(await lines.receive_until(b"\n", 100))
        path = "/mcp" if transport == "streamable-http" else "/sse"
        try:
            yield f"{scheme}://127.0.0.1:{bound}{path}"
        finally:
            process.kill()


@dataclass
class RunningGateway:
    url: str
    process: Process
    events: list[dict[str, Any]] = field(default_factory=list)
    not_json: list[bytes] = field(default_factory=list)  # stderr lines that are no JSON object (none should be)
    _arrived: anyio.Event = field(default_factory=anyio.Event)

    def add(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self._arrived.set()
        self._arrived = anyio.Event()

    async def wait_for_event(self, name: str | tuple[str, ...], timeout: float = 30, **fields: Any) -> dict[str, Any]:
        """The first not yet consumed log event called ``name`` (or any of the names, whichever comes first),
        with these ``fields``, waiting for it if need be."""
        names = (name,) if isinstance(name, str) else name
        with anyio.fail_after(timeout):
            while True:
                arrived = self._arrived
                for event in self.events:
                    if event.get("event") in names and all(event.get(k) == v for k, v in fields.items()):
                        self.events.remove(event)
                        return event
                await arrived.wait()


@asynccontextmanager
async def running_gateway(
    config: Path, *extra: str, env: dict[str, str] | None = None, pass_fds: tuple[int, ...] = ()
) -> AsyncIterator[RunningGateway]:
    """The gateway serving HTTP on an ephemeral port, its log events collected as they come (``env``: in
    its environment, besides this process's; ``pass_fds``: descriptors it inherits, as from a client)."""
    command = [*gateway_command(config, "serve"), "--log-level", "info", *extra]
    environment = {**os.environ, **(env or {})}
    async with await anyio.open_process(command, cwd=ROOT, env=environment, pass_fds=pass_fds) as process:
        assert process.stderr is not None
        lines = BufferedByteReceiveStream(process.stderr)
        running: RunningGateway | None = None
        before: list[dict[str, Any]] = []  # start-up events (upstreams settle before the gateway listens)
        with anyio.fail_after(30):
            while running is None:
                event = json.loads(await lines.receive_until(b"\n", 1 << 20))
                before.append(event)
                if event.get("event") == "http_listening":
                    running = RunningGateway(event["url"].rsplit("/", 1)[0], process, before)

        async def collect() -> None:
            ended = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.IncompleteRead)
            with suppress(*ended):
                while True:
                    line = await lines.receive_until(b"\n", 1 << 20)
                    try:
                        running.add(json.loads(line))
                    except ValueError:
                        running.not_json.append(line)

        async with anyio.create_task_group() as tg:
            tg.start_soon(collect)
            try:
                yield running
            finally:
                if process.returncode is None:
                    process.terminate()
                with anyio.fail_after(20):
                    await process.wait()
                tg.cancel_scope.cancel()


@asynccontextmanager
async def gateway_http(config: Path) -> AsyncIterator[str]:
    """The gateway serving HTTP on an ephemeral port; yields its base URL."""
    async with running_gateway(config) as running:
        yield running.url


HTTP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw"}},
}
"""A raw handshake-era initialize request, for tests that speak HTTP without an SDK."""


def team_skills(root: Path) -> Path:
    """A repository of skills: ``pdf`` (tagged, with a file beside), ``refunds`` at the top and another
    ``refunds`` in the ``billing`` project (whose name, as a prompt, would be taken)."""
    for folder, text in (
        (root / ".claude/skills/pdf", "name: pdf\ndescription: Fill PDF forms\ntags: [docs]"),
        (root / ".claude/skills/refunds", "name: refunds\ndescription: Refund rules"),
        (root / "billing/.claude/skills/refunds", "name: refunds\ndescription: Billing's refunds"),
    ):
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\n{text}\n---\nBody\n")
    (root / ".claude/skills/pdf/forms").mkdir()
    (root / ".claude/skills/pdf/forms/w9.md").write_text("A form\n")
    return root
