"""Remote upstreams (official SDK 2.x servers over Streamable HTTP and SSE, in processes of their own)
that start after the gateway, go away and come back on the same port: retried with backoff and serving
again within seconds of listening; while down, reported down everywhere (the upstream's state, the
listing's ``_meta``, ``/readyz``, the metrics, an error naming it). (server-everything and an mcp 1.8.1
server: tests/interop/test_remote_restarts.py.)"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from pathlib import Path

import anyio
import httpx
import mcp.types as t
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, MCPError

from tests.integration.helpers import ROOT, RunningGateway, http_upstream, running_gateway, write_config
from tests.integration.services import free_port
from tests.servers.http_serve import REFUSALS

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
PATHS = {"streamable-http": "/mcp", "sse": "/sse"}


@asynccontextmanager
async def listening(command: list[str]) -> AsyncIterator[Process]:
    """A server process, once it prints the port it listens on (it accepts connections from then on)."""
    async with await anyio.open_process(command, cwd=ROOT) as process:
        assert process.stdout is not None
        with anyio.fail_after(20):
            await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 100)
        try:
            yield process
        finally:
            with suppress(ProcessLookupError):  # killed already by the test
                process.kill()


def sdk_server(port: int, transport: str = "streamable-http") -> AbstractAsyncContextManager[Process]:
    """``tests/servers/dynamic.py`` served over HTTP on ``port``."""
    return listening([sys.executable, "-m", "tests.servers.http_serve", "dynamic", transport, str(port)])


def remote(namespace: str, port: int, transport: str = "streamable-http") -> dict[str, object]:
    return {"namespace": namespace, "transport": transport, "url": f"http://127.0.0.1:{port}{PATHS[transport]}"}


async def ready(gateway: RunningGateway, namespace: str, timeout: float) -> None:
    await gateway.wait_for_event("upstream_state", timeout=timeout, upstream=namespace, state="ready")


async def test_servers_that_start_after_the_gateway_come_up(tmp_path: Path) -> None:
    """An HTTP upstream not yet listening went failed, then stopped, and was never retried (0 of 20)."""
    ports = {f"late{i}": free_port() for i in range(4)}
    upstreams = [
        remote(name, port, "sse" if i == 3 else "streamable-http") for i, (name, port) in enumerate(ports.items())
    ]
    config = write_config(tmp_path / "c.toml", upstreams, server={"transport": "http", "port": 0})
    async with running_gateway(config) as gateway:
        for name in ports:
            down = await gateway.wait_for_event("upstream_state", upstream=name, state="backing-off")
            assert f"Upstream '{name}' cannot be reached" in down["error"], down
        async with anyio.create_task_group() as servers:
            for i, port in enumerate(ports.values()):
                await servers.start(_serve_until_cancelled, port, "sse" if i == 3 else "streamable-http")
            for name in ports:
                await ready(gateway, name, timeout=10)  # within seconds of listening
            async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
                names = {p.name for p in (await client.list_prompts()).prompts}
                assert {f"{name}__pid" for name in ports} <= names
            servers.cancel_scope.cancel()


async def _serve_until_cancelled(port: int, transport: str, *, task_status: anyio.abc.TaskStatus[None]) -> None:
    async with sdk_server(port, transport):
        task_status.started()
        await anyio.sleep_forever()


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_a_server_that_goes_away_is_reported_down_and_served_again_when_back(
    tmp_path: Path, transport: str
) -> None:
    port = free_port()
    config = write_config(
        tmp_path / "c.toml", [remote("dyn", port, transport)], server={"transport": "http", "port": 0}
    )
    async with sdk_server(port, transport) as server, running_gateway(config) as gateway:
        await ready(gateway, "dyn", timeout=20)
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client, httpx.AsyncClient() as http:
            before = (await client.get_prompt("dyn__pid")).messages[0].content
            assert isinstance(before, t.TextContent)
            server.kill()
            await server.wait()
            await gateway.wait_for_event("upstream_state", timeout=15, upstream="dyn", state="backing-off")
            listing = await client.list_prompts()
            assert listing.prompts == []
            assert (listing.meta or {}).get("prompt-gateway/unavailable") == ["dyn"]
            with pytest.raises(MCPError) as down:
                await client.get_prompt("dyn__pid")
            assert "Upstream 'dyn'" in down.value.error.message
            assert (await http.get(f"{gateway.url}/readyz")).status_code == 503
            metrics = (await http.get(f"{gateway.url}/metrics")).text
            assert 'prompt_gateway_upstream_up{upstream="dyn"} 0.0' in metrics
            async with sdk_server(port, transport):  # back on the same port, a new process
                await ready(gateway, "dyn", timeout=10)
                after = (await client.get_prompt("dyn__pid")).messages[0].content
                assert isinstance(after, t.TextContent)
                assert after.text != before.text
                assert (await http.get(f"{gateway.url}/readyz")).status_code == 200


def answering(port: int, status: int) -> AbstractAsyncContextManager[Process]:
    """A server on ``port`` answering every request with ``status`` (a proxy during a deploy)."""
    return listening([sys.executable, "-m", "tests.servers.unavailable", str(port), str(status)])


@pytest.mark.parametrize("status", [503, 500, 401])
async def test_an_http_error_at_start_is_tried_again_not_given_up(tmp_path: Path, status: int) -> None:
    """Any HTTP status to initialize (a proxy's 503 during a deploy) ended the upstream for good: failed,
    then stopped, never retried."""
    port = free_port()
    config = write_config(tmp_path / "c.toml", [remote("dyn", port)], server={"transport": "http", "port": 0})
    async with AsyncExitStack() as stack:
        stub = await stack.enter_async_context(answering(port, status))  # there before the gateway starts
        gateway = await stack.enter_async_context(running_gateway(config))
        down = await gateway.wait_for_event("upstream_state", timeout=20, upstream="dyn", state="backing-off")
        assert f"HTTP {status}" in down["error"], down
        stub.kill()
        await stub.wait()
        async with sdk_server(port):
            await ready(gateway, "dyn", timeout=10)
        assert not [e for e in gateway.events if e.get("upstream") == "dyn" and e.get("state") == "failed"]


async def test_a_ready_server_that_starts_answering_503_is_reported_down(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path / "c.toml", [remote("dyn", port)], server={"transport": "http", "port": 0})
    async with running_gateway(config) as gateway:
        async with sdk_server(port) as server:
            await ready(gateway, "dyn", timeout=20)
            server.kill()
            await server.wait()
        async with answering(port, 503), Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
            with pytest.raises(MCPError) as unavailable:
                await client.get_prompt("dyn__pid")
            assert "Upstream 'dyn'" in unavailable.value.error.message
            down = await gateway.wait_for_event("upstream_state", timeout=15, upstream="dyn", state="backing-off")
            assert "dyn" in down["error"]
            async with httpx.AsyncClient() as http:
                assert (await http.get(f"{gateway.url}/readyz")).status_code == 503


@pytest.mark.parametrize("refusal", list(REFUSALS))
async def test_a_server_that_refuses_the_probe_is_spoken_to_with_the_handshake_at_once(
    tmp_path: Path, refusal: str
) -> None:
    """git-mcp-server answers server/discover with HTTP 500 and a JSON-RPC error: the gateway backed off and
    tried again for ever, and listed nothing. Any refusal of the probe (an HTTP error, a JSON-RPC error, a
    body that is not JSON) now means a handshake-era server, at once, as the official SDK's client has it."""
    async with http_upstream("dynamic", "streamable-http", env={"SERVE_REFUSE_DISCOVER": refusal}) as url:
        config = write_config(
            tmp_path / "c.toml",
            [{"namespace": "dyn", "transport": "streamable-http", "url": url, "timeout_s": 60}],
            server={"transport": "http", "port": 0},
        )
        async with running_gateway(config) as gateway:
            settled = await gateway.wait_for_event("upstream_state", timeout=30, upstream="dyn")
            assert settled["state"] == "ready", settled
            assert settled["protocol_version"] == "2025-11-25"
            assert settled["probe"].startswith("handshake: server/discover ")
            assert "not answered" not in settled["probe"]  # the refusal decided, not the probe's patience
            async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
                assert "dyn__pid" in {p.name for p in (await client.list_prompts()).prompts}
                pid = (await client.get_prompt("dyn__pid")).messages[0].content
                assert isinstance(pid, t.TextContent)
