"""A get's arguments checked against those the prompt lists, through the gateway to the official SDK
client over stdio and Streamable HTTP, in both eras: an unknown one is refused (-32602, naming it)
before it reaches an upstream, which would answer with anything (``tests/servers/arguments.py``: a
bare code 0), against the arguments as an override shows them; a prompt that lists none passes what it
is sent; prompts-as-tools say the same as a tool error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp.types as t
import pytest
from mcp import Client, MCPError

from tests.integration.helpers import gateway_params, running_gateway, sdk_upstream, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REVIEW = """---
arguments:
  - name: code
    required: true
---
Review {{ code }}
"""


def config(tmp_path: Path, *, http: bool) -> Path:
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "review.md").write_text(REVIEW)
    pinned = {"fixed": {"max_length": "100"}, "arguments": {"url": {"default": "https://example.com"}}}
    server: dict[str, Any] = {"transport": "http", "port": 0} if http else {"transport": "stdio"}
    return write_config(
        tmp_path / "g.toml",
        [
            sdk_upstream("f", "arguments"),
            sdk_upstream("g", "arguments", overrides={"fetch": pinned}),
            {"namespace": "team", "transport": "files", "path": str(folder)},
        ],
        server={**server, "prompts_as_tools": True},
        gateway={"startup_wait_s": 60},  # the first get waits for every upstream, however busy the machine
    )


@asynccontextmanager
async def client(tmp_path: Path, *, http: bool, mode: str) -> AsyncIterator[Client]:
    path = config(tmp_path, http=http)
    if not http:
        async with Client(gateway_params(path), mode=mode, cache=None) as stdio:
            yield stdio
        return
    async with running_gateway(path) as gateway, Client(f"{gateway.url}/mcp", mode=mode, cache=None) as remote:
        yield remote


async def refusal(client: Client, name: str, arguments: dict[str, str]) -> t.ErrorData:
    with pytest.raises(MCPError) as refused:
        await client.get_prompt(name, arguments)
    return refused.value.error


@pytest.mark.parametrize(
    ("http", "mode"), [(False, "legacy"), (False, "2026-07-28"), (True, "legacy"), (True, "2026-07-28")]
)
async def test_unknown_arguments_are_refused_by_name(tmp_path: Path, http: bool, mode: str) -> None:
    async with client(tmp_path, http=http, mode=mode) as c:
        unknown = await refusal(c, "f__fetch", {"url": "https://example.org", "bogus": "x"})
        assert (unknown.code, unknown.message) == (
            -32602,
            "Invalid params: unknown argument 'bogus' for prompt f__fetch (it takes: url, max_length)",
        )  # it was code 0 "Error rendering prompt fetch", the upstream's answer
        missing = await refusal(c, "f__fetch", {"max_length": "5"})
        assert (missing.code, missing.message) == (-32602, "Missing required argument for prompt f__fetch: url")
        fetched = await c.get_prompt("f__fetch", {"url": "https://example.org", "max_length": "5"})
        assert fetched.messages[0].content == t.TextContent(
            type="text", text="fetch https://example.org (at most 5 characters)"
        )

        # what the client sees of an override: max_length is the gateway's, url has a default
        listed = {p.name: [a.name for a in p.arguments or ()] for p in (await c.list_prompts()).prompts}
        assert listed["g__fetch"] == ["url"]
        fixed = await refusal(c, "g__fetch", {"max_length": "5"})
        assert (
            fixed.message
            == "Invalid params: argument max_length of prompt g__fetch is set by the gateway; leave it out"
        )
        shown = await refusal(c, "g__fetch", {"bogus": "x"})
        assert shown.message == "Invalid params: unknown argument 'bogus' for prompt g__fetch (it takes: url)"
        defaulted = await c.get_prompt("g__fetch", {})
        assert defaulted.messages[0].content == t.TextContent(
            type="text", text="fetch https://example.com (at most 100 characters)"
        )

        # a prompt that lists no arguments: the upstream decides (many read arguments they never list)
        passed = await refusal(c, "f__today", {"day": "monday"})
        assert (passed.code, passed.message) == (0, "Error rendering prompt today")

        # the gateway's own prompt files: the same words
        review = await refusal(c, "team__review", {"code": "x", "bogus": "y"})
        assert (review.code, review.message) == (
            -32602,
            "Invalid params: unknown argument 'bogus' for prompt team__review (it takes: code)",
        )

        # prompts as tools go the same way: a tool error the model can read
        tool = await c.call_tool("get_prompt", {"name": "f__fetch", "arguments": {"url": "u", "bogus": "x"}})
        assert tool.is_error
        assert tool.content == [
            t.TextContent(
                type="text",
                text="Invalid params: unknown argument 'bogus' for prompt f__fetch (it takes: url, max_length)",
            )
        ]
