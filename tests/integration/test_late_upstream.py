"""An upstream that starts late loses nothing for the sessions begun before it: a handshake-era client that
initialized while the only upstream offering completions was not yet allowed to start gets the
``completions`` capability all the same, and once that upstream's prompts are listed, completes them in
the same session (over stdio and over Streamable HTTP, the official SDK as client and as upstream)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import mcp.types as t
import pytest
from mcp import Client, MCPError

from tests.integration.helpers import (
    Gate,
    ListChangedWatcher,
    gateway_params,
    running_gateway,
    sdk_upstream,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

COMPLETING = [sys.executable, "-m", "tests.servers.completing"]
VOICE = t.PromptReference(type="ref/prompt", name="rich__voice")  # from tests/servers/rich.py: no completions


@asynccontextmanager
async def client_of(config: Path, front: str, watcher: ListChangedWatcher) -> AsyncIterator[Client]:
    """An SDK client of the gateway serving ``config`` over ``front``, connected (initialized) at once."""
    if front == "stdio":
        async with Client(gateway_params(config), mode="legacy", cache=None, message_handler=watcher) as client:
            yield client
        return
    async with (
        running_gateway(config) as gateway,
        Client(f"{gateway.url}/mcp", mode="legacy", cache=None, message_handler=watcher) as client,
    ):
        yield client


async def listed_once_there(client: Client, watcher: ListChangedWatcher, *wanted: str) -> None:
    """Until the listing holds every name ``wanted``, asked again at each list_changed."""
    while not set(wanted) <= {p.name for p in (await client.list_prompts()).prompts}:
        await watcher.wait(timeout=60)


@pytest.mark.parametrize("front", ["stdio", "http"])
async def test_a_late_upstreams_completions_reach_a_session_begun_before_it(tmp_path: Path, front: str) -> None:
    """server-everything starting 8 s late left a session without ``completions`` for good: -32601 on
    completion/complete once its prompts were listed."""
    gate = Gate(tmp_path)
    config = write_config(
        tmp_path / "c.toml",
        [sdk_upstream("rich", "rich"), gate.upstream("late", COMPLETING, timeout_s=60)],  # rich offers none
        gateway={"startup_wait_s": 0.5},
        server={"transport": "http", "port": 0} if front == "http" else None,
    )
    watcher = ListChangedWatcher()
    async with client_of(config, front, watcher) as client:
        assert client.server_capabilities.completions is not None  # "late" had not even been let start
        await gate.open()
        await listed_once_there(client, watcher, "late__weather", "rich__voice")
        ref = t.PromptReference(type="ref/prompt", name="late__weather")
        city = await client.complete(ref, {"name": "city", "value": "B"}, context_arguments={"country": "US"})
        assert city.completion.values == ["Boston"]
        rich = await client.complete(VOICE, {"name": "x", "value": ""})
        assert rich.completion.values == []  # per prompt, as before: an upstream without completions offers none


async def test_completions_are_not_declared_once_every_upstream_has_said_it_offers_none(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml",
        [sdk_upstream("rich", "rich"), sdk_upstream("pag", "paginated")],
        server={"transport": "http", "port": 0},
    )
    async with running_gateway(config) as gateway:
        for namespace in ("rich", "pag"):
            await gateway.wait_for_event("upstream_state", upstream=namespace, state="ready")
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
            assert client.server_capabilities.completions is None
            with pytest.raises(MCPError) as refused:
                await client.complete(VOICE, {"name": "x", "value": ""})
            assert refused.value.error.code == -32601
            assert "rich__voice" in [p.name for p in (await client.list_prompts()).prompts]
