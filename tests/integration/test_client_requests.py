"""Requests an upstream sends the client while rendering a prompt reach the client that asked for the
prompt, under its connection's own ids, only for capabilities it declared; where the gateway cannot
tell which client a request is for, the upstream gets an error that says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp.types as t
import pytest
from mcp import Client
from mcp.client.sse import sse_client

from tests.integration.helpers import gateway_http, gateway_params, sdk_upstream, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def who(context: object, params: t.ElicitRequestParams) -> t.ElicitResult:
    assert isinstance(params, t.ElicitRequestFormParams)
    assert params.message == "Who are you?"
    return t.ElicitResult(action="accept", content={"name": "Ada"})


async def muse(context: object, params: t.CreateMessageRequestParams) -> t.CreateMessageResult:
    return t.CreateMessageResult(role="assistant", content=t.TextContent(type="text", text="lighthouse"), model="m")


async def roots(context: object) -> t.ListRootsResult:
    return t.ListRootsResult(roots=[t.Root(uri="file:///work/project")])


def text(result: t.GetPromptResult) -> str:
    content = result.messages[0].content
    assert isinstance(content, t.TextContent)
    return content.text


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "c.toml", [sdk_upstream("ask", "asking", protocol="legacy")])


async def test_elicitation_sampling_and_roots_reach_the_client_that_asked(config: Path) -> None:
    callbacks: dict[str, Any] = {"elicitation_callback": who, "sampling_callback": muse, "list_roots_callback": roots}
    async with Client(gateway_params(config), mode="legacy", cache=None, **callbacks) as client:
        assert text(await client.get_prompt("ask__who")) == "Hello, Ada (accept)"
        assert text(await client.get_prompt("ask__muse")) == "The model said: lighthouse"
        assert text(await client.get_prompt("ask__where")) == "Roots: file:///work/project"


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_http_clients_are_asked_on_their_event_stream(tmp_path: Path, transport: str) -> None:
    """The request goes out on the session's GET stream (the legacy transport's one stream); the client's
    POSTed answer reaches the upstream."""
    config = write_config(
        tmp_path / "c.toml", [sdk_upstream("ask", "asking", protocol="legacy")], server={"transport": "http", "port": 0}
    )
    callbacks: dict[str, Any] = {"elicitation_callback": who, "sampling_callback": muse, "list_roots_callback": roots}
    async with gateway_http(config) as base:
        target = f"{base}/mcp" if transport == "streamable-http" else sse_client(f"{base}/sse")
        async with Client(target, mode="legacy", cache=None, **callbacks) as client:
            assert text(await client.get_prompt("ask__who")) == "Hello, Ada (accept)"
            assert text(await client.get_prompt("ask__muse")) == "The model said: lighthouse"
            assert text(await client.get_prompt("ask__where")) == "Roots: file:///work/project"


async def test_a_client_without_the_capability_is_not_asked(config: Path) -> None:
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        answer = text(await client.get_prompt("ask__who"))
    assert answer.startswith("refused -32601")
    assert "did not declare the elicitation capability" in answer


async def test_with_two_requests_in_flight_the_upstream_is_told_why_it_cannot_ask(config: Path) -> None:
    asked, release = anyio.Event(), anyio.Event()

    async def slow_who(context: object, params: t.ElicitRequestParams) -> t.ElicitResult:
        asked.set()
        await release.wait()
        return await who(context, params)

    async with Client(gateway_params(config), mode="legacy", cache=None, elicitation_callback=slow_who) as client:
        first: list[str] = []

        async def ask_first() -> None:
            first.append(text(await client.get_prompt("ask__who")))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask_first)
            with anyio.fail_after(20):
                await asked.wait()  # the first request's question is with the client
            second = text(await client.get_prompt("ask__who"))  # asks while two requests are in flight
            release.set()
        assert second.startswith("refused -32600")
        assert "cannot tell which client" in second
        assert first == ["Hello, Ada (accept)"]
