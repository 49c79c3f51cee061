"""Servers nobody here wrote, restarted under the gateway: npm server-everything over Streamable HTTP
(which answers a session it no longer knows with HTTP 400 "No valid session ID provided", not 404) and
over SSE, killed and started again on the same port; and an mcp 1.8.1 FastMCP server over stdio under
the default ``protocol = "auto"``, which crashes on the era probe."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import anyio
import mcp.types as t
import pytest
from anyio.abc import Process
from mcp import Client, MCPError

from tests.integration.helpers import running_gateway, write_config
from tests.integration.services import free_port
from tests.interop.conftest import MODULES, ROOT

pytestmark = pytest.mark.anyio
SERVER_EVERYTHING = MODULES / "server-everything" / "dist" / "index.js"
MODES = {"streamable-http": ("streamableHttp", "/mcp"), "sse": ("sse", "/sse")}


@asynccontextmanager
async def everything(node: str, transport: str, port: int) -> AsyncIterator[Process]:
    mode, _ = MODES[transport]
    async with await anyio.open_process(
        [node, str(SERVER_EVERYTHING), mode], env={"PORT": str(port), "PATH": ""}, cwd=ROOT / "interop"
    ) as server:
        assert server.stderr is not None
        said = b""
        with anyio.fail_after(30):
            while str(port).encode() not in said:
                said += await server.stderr.receive()
        try:
            yield server
        finally:
            with suppress(ProcessLookupError):
                server.kill()


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_server_everything_restarted_on_its_port_is_served_again(
    node: str, tmp_path: Path, transport: str
) -> None:
    """Every get failed 'answered HTTP 400' after a restart, until the gateway restarted."""
    port = free_port()
    url = f"http://127.0.0.1:{port}{MODES[transport][1]}"
    config = write_config(
        tmp_path / "c.toml",
        [{"namespace": "everything", "transport": transport, "url": url}],
        server={"transport": "http", "port": 0},
    )
    async with everything(node, transport, port) as server, running_gateway(config) as gateway:
        await gateway.wait_for_event("upstream_state", timeout=30, upstream="everything", state="ready")
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
            assert (await client.get_prompt("everything__simple-prompt")).messages
            server.kill()
            await server.wait()
            async with everything(node, transport, port):
                failures: list[str] = []
                with anyio.fail_after(15):  # served again within seconds of listening, without a gateway restart
                    while True:
                        try:
                            got = await client.get_prompt("everything__args-prompt", {"city": "Paris"})
                            break
                        except MCPError as exc:  # meanwhile: an error naming the upstream, never the client's
                            failures.append(exc.error.message)
                            await gateway.wait_for_event("upstream_state", upstream="everything", state="ready")
                assert all("Upstream 'everything'" in failure for failure in failures), failures
                content = got.messages[0].content
                assert isinstance(content, t.TextContent)
                assert "Paris" in content.text


async def test_mcp_1_8_1_over_stdio_is_known_without_waiting_out_the_probe(
    tmp_path: Path, legacy_sdk_python: str
) -> None:
    """It crashes on the probe but reads on until its next line: the gateway waited the probe's whole 10 s
    patience, then reported 'exited during initialize' and backed off. A ping right behind the probe makes
    it exit at once, and it is restarted for the handshake only."""
    server = str(ROOT / "tests" / "servers" / "fastmcp_legacy.py")
    config = write_config(
        tmp_path / "c.toml",
        [{"namespace": "old", "command": legacy_sdk_python, "args": [server], "timeout_s": 30}],
        server={"transport": "http", "port": 0},
    )
    async with running_gateway(config) as gateway:
        died = await gateway.wait_for_event("upstream_died_on_probe", timeout=30, upstream="old")
        assert "on the server/discover probe" in died["error"], died  # not "during initialize", 10 s later
        ready = await gateway.wait_for_event("upstream_state", timeout=30, upstream="old", state="ready")
        assert ready["protocol_version"] == "2024-11-05"
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
            assert [p.name for p in (await client.list_prompts()).prompts] == ["old__greet"]


async def test_a_server_that_died_of_the_probe_is_spoken_to_with_the_handshake_from_its_next_run(
    tmp_path: Path, legacy_sdk_python: str
) -> None:
    """The probe's restart is paid once: the next run of the gateway remembers the server's era (the
    first came up 1.6x as slow as with protocol = "legacy", every later one as fast)."""
    server = str(ROOT / "tests" / "servers" / "fastmcp_legacy.py")
    config = write_config(
        tmp_path / "c.toml",
        [{"namespace": "old", "command": legacy_sdk_python, "args": [server], "timeout_s": 30}],
        server={"transport": "http", "port": 0},
    )
    for run, died in ((1, True), (2, False)):
        async with running_gateway(config) as gateway:
            ready = await gateway.wait_for_event("upstream_state", timeout=30, upstream="old", state="ready")
            assert ready["protocol_version"] == "2024-11-05"
            deaths = [e for e in gateway.events if e.get("event") == "upstream_died_on_probe"]
            assert bool(deaths) is died, (run, deaths)
