"""Servers written with the Python SDK as it was in May 2025 (mcp 1.8.1, FastMCP), for real: over stdio
they exit on the gateway's era probe, over Streamable HTTP they answer POST /mcp with 307 to /mcp/.
Both must come up behind the gateway with the default settings (``protocol = "auto"``)."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import mcp.types as t
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client

from tests.integration.helpers import ListChangedWatcher, gateway_params, write_config
from tests.integration.services import free_port
from tests.interop.conftest import ROOT

pytestmark = pytest.mark.anyio
SERVER = str(ROOT / "tests" / "servers" / "fastmcp_legacy.py")


async def test_mcp_1_8_1_fastmcp_servers_come_up_over_stdio_and_behind_their_redirect(
    tmp_path: Path, legacy_sdk_python: str
) -> None:
    port = free_port()
    env = {**os.environ, "FASTMCP_PORT": str(port), "FASTMCP_HOST": "127.0.0.1"}
    command = [legacy_sdk_python, SERVER, "streamable-http"]
    async with await anyio.open_process(command, env=env) as http_server:
        assert http_server.stderr is not None
        log = BufferedByteReceiveStream(http_server.stderr)
        with anyio.fail_after(30):
            while b"Uvicorn running on" not in await log.receive_until(b"\n", 1 << 16):
                pass
        config = write_config(
            tmp_path / "c.toml",
            [
                {"namespace": "old", "command": legacy_sdk_python, "args": [SERVER]},
                {"namespace": "oldhttp", "transport": "streamable-http", "url": f"http://127.0.0.1:{port}/mcp"},
            ],
        )
        changes = ListChangedWatcher()
        async with Client(gateway_params(config), mode="legacy", cache=None, message_handler=changes) as client:
            wanted = {"old__greet", "oldhttp__greet"}
            with anyio.fail_after(60):
                while not wanted <= {p.name for p in (await client.list_prompts()).prompts}:
                    await changes.wait(timeout=60)  # an upstream still coming up is announced when it does
            for name in sorted(wanted):
                result = await client.get_prompt(name, {"name": "Ada"})
                assert result.messages[0].content == t.TextContent(type="text", text="Hello, Ada! (from mcp 1.8.1)")
        http_server.terminate()
