"""Prompts as tools through the real gateway, to SDK clients of both eras over stdio and HTTP: the two
tools, a get through them, policy (a denied prompt is invisible through the tools too) and
tools/list_changed when a prompt file changes. The Inspector CLI's call is in tests/interop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp.types as t
import pytest
from mcp import Client, MCPError

from tests.integration.helpers import ListChangedWatcher, demo_upstream, gateway_params, running_gateway, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def config(tmp_path: Path, **server: Any) -> Path:
    prompts = tmp_path / "prompts"
    prompts.mkdir(exist_ok=True)
    (prompts / "standup.md").write_text("---\ntags: [team]\n---\nWhat did you do yesterday, {{ who }}?\n")
    return write_config(
        tmp_path / "c.toml",
        [demo_upstream("writing", "writing"), {"namespace": "ours", "transport": "files", "path": str(prompts)}],
        server={"prompts_as_tools": True, **server},
        policy={"deny": ["writing__proofread"]},
    )


async def exercise(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"list_prompts", "get_prompt"}
    names = tools["get_prompt"].input_schema["properties"]["name"]["enum"]
    assert "writing__translate" in names
    assert "writing__proofread" not in names

    listed = await client.call_tool("list_prompts", {"tag": "team"})
    assert not listed.is_error
    assert listed.structured_content == {
        "prompts": [{"name": "ours__standup", "arguments": [{"name": "who", "required": True}], "tags": ["team"]}]
    }

    got = await client.call_tool(
        "get_prompt", {"name": "writing__translate", "arguments": {"text": "hello", "language": "German"}}
    )
    assert not got.is_error
    assert isinstance(got.content[0], t.TextContent)
    assert "into German" in got.content[0].text

    denied = await client.call_tool("get_prompt", {"name": "writing__proofread", "arguments": {"text": "x"}})
    assert denied.is_error
    assert denied.content == [t.TextContent(type="text", text="Unknown prompt: writing__proofread")]
    everything = await client.call_tool("list_prompts", {})
    assert "writing__proofread" not in [p["name"] for p in (everything.structured_content or {})["prompts"]]
    with pytest.raises(MCPError, match="Invalid cursor") as refused:  # one page: no cursor is ours (it was page 1)
        await client.list_tools(cursor="junk")
    assert refused.value.error.code == -32602
    with pytest.raises(MCPError) as unknown:  # an unknown name is repeated up to 100 characters (it came back whole)
        await client.get_prompt("x" * 5000)
    assert unknown.value.error.message == f"Unknown prompt: {'x' * 100}…"


async def test_prompts_as_tools_over_stdio_and_a_file_change_announces_the_tools(tmp_path: Path) -> None:
    path = config(tmp_path)
    changes = ListChangedWatcher(t.ToolListChangedNotification)
    async with Client(gateway_params(path), mode="legacy", cache=None, message_handler=changes) as client:
        await exercise(client)
        await anyio.Path(tmp_path / "prompts" / "retro.md").write_text("How did the sprint go?\n")
        await changes.wait()
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert "ours__retro" in tools["get_prompt"].input_schema["properties"]["name"]["enum"]


async def test_prompts_as_tools_over_http_for_both_eras(tmp_path: Path) -> None:
    async with running_gateway(config(tmp_path, transport="http", port=0)) as gw:
        async with Client(f"{gw.url}/mcp", mode="legacy", cache=None) as client:
            await exercise(client)
        async with Client(f"{gw.url}/mcp", mode="2026-07-28", cache=None) as client:
            await exercise(client)


async def test_without_the_option_the_gateway_declares_no_tools(tmp_path: Path) -> None:
    path = config(tmp_path)
    path.write_text(path.read_text().replace("prompts_as_tools = true", "prompts_as_tools = false"))
    async with Client(gateway_params(path), mode="legacy", cache=None) as client:
        assert client.server_capabilities is not None
        assert client.server_capabilities.tools is None


async def test_the_list_tool_names_the_upstreams_it_could_not_list(tmp_path: Path) -> None:
    """A tester's ``list_prompts`` answered ``{"prompts": []}`` while its only upstream was down, where
    ``prompts/list`` said so in its ``_meta``: a model could not tell "nothing matches" from "server down"."""
    down = {"namespace": "remote", "command": str(tmp_path / "not-installed"), "timeout_s": 5}
    path = write_config(
        tmp_path / "c.toml", [demo_upstream("writing", "writing"), down], server={"prompts_as_tools": True}
    )
    async with Client(gateway_params(path), mode="legacy", cache=None) as client:
        listed = await client.call_tool("list_prompts", {"query": "no prompt is called this"})
    assert not listed.is_error
    assert listed.structured_content == {"prompts": [], "unavailable": ["remote"]}
