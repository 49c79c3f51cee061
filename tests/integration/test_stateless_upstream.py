"""A handshake-era upstream served over Streamable HTTP without sessions (the TypeScript SDK's default for
2025 clients, the Python SDK's ``stateless_http``): it declares ``prompts.listChanged`` and can never send
it, having no stream to send it on."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.integration.helpers import http_upstream, running_gateway, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_a_stateless_upstreams_new_prompt_is_listed_though_it_cannot_announce_it(tmp_path: Path) -> None:
    """The gateway took its declared listChanged at its word and held its listing until a reconnect: a
    prompt added on the server never appeared."""
    async with http_upstream("dynamic", "streamable-http", env={"SERVE_STATELESS": "1"}) as url:
        upstream = {"namespace": "dyn", "transport": "streamable-http", "url": url, "protocol": "legacy"}
        config = write_config(tmp_path / "c.toml", [upstream], server={"transport": "http", "port": 0})
        async with running_gateway(config) as gateway:
            await gateway.wait_for_event("upstream_state", upstream="dyn", state="ready")
            async with Client(streamable_http_client(f"{gateway.url}/mcp"), mode="legacy", cache=None) as client:
                before = {p.name for p in (await client.list_prompts()).prompts}
                assert "dyn__added" not in before
                await client.get_prompt("dyn__add", {"name": "added"})  # announced to no one: it has no stream
                after = {p.name for p in (await client.list_prompts()).prompts}
    assert after == before | {"dyn__added"}
