"""Overrides through the real gateway, with an SDK upstream and SDK clients of both eras over stdio and
HTTP: renamed and redescribed prompts, defaults filled in, fixed arguments set and refused from the
client, policy on the new names, a collision after a rename, and a reload that changes overrides."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import mcp.types as t
import pytest
from mcp import Client, MCPError

from tests.integration.helpers import (
    ListChangedWatcher,
    gateway_params,
    running_gateway,
    sdk_upstream,
    write_config,
)
from tests.schema_check import check

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
HTTP = {"transport": "http", "port": 0}

FORECAST = {
    "name": "forecast",
    "title": "Forecast",
    "description": "The team's weather prompt.",
    "fixed": {"country": "FR"},
    "arguments": {"units": {"default": "imperial", "description": "metric or imperial"}},
    "tags": ["weather"],
    "icons": [{"src": "https://example.com/sun.png", "mime_type": "image/png", "sizes": ["48x48"]}],
}


def upstreams(forecast: dict[str, Any] = FORECAST) -> list[dict[str, Any]]:
    return [
        sdk_upstream("wx", "completing", overrides={"weather": forecast, "internal_notes": {"name": "notes"}}),
        # a second copy: its weather takes the name wx freed, its notes lose to wx's (first in config wins)
        sdk_upstream(
            "more",
            "completing",
            overrides={"weather": {"name": "wx__weather"}, "internal_notes": {"name": "wx__internal_notes"}},
        ),
    ]


POLICY = {"deny": ["wx__internal_*"]}  # wx's notes were renamed "notes": still hidden


async def exercise(client: Client, revision: str) -> None:
    listing = await client.list_prompts()
    names = [p.name for p in listing.prompts]
    assert names == ["forecast", "wx__weather"]  # "notes" is denied by its old name; more's notes lost
    forecast = listing.prompts[0]
    assert forecast.title == "Forecast"
    assert forecast.description == "The team's weather prompt."
    assert [(a.name, a.required, a.description) for a in forecast.arguments or []] == [
        ("city", True, None),
        ("units", False, "metric or imperial"),
    ]  # country is fixed: not listed
    raw = forecast.model_dump(by_alias=True, exclude_none=True, mode="json")
    check(revision, "Prompt", raw)
    if revision >= "2025-11-25":
        assert raw["icons"] == [{"src": "https://example.com/sun.png", "mimeType": "image/png", "sizes": ["48x48"]}]

    got = await client.get_prompt("forecast", {"city": "Lyon"})
    assert got.messages[0].content == t.TextContent(type="text", text="Weather in Lyon, FR (imperial)")
    got = await client.get_prompt("forecast", {"city": "Lyon", "units": "metric"})
    assert got.messages[0].content == t.TextContent(type="text", text="Weather in Lyon, FR (metric)")
    with pytest.raises(MCPError) as refused:
        await client.get_prompt("forecast", {"city": "Austin", "country": "US"})
    assert refused.value.error.code == -32602
    assert "country of prompt forecast is set by the gateway" in refused.value.error.message
    with pytest.raises(MCPError) as unknown:
        await client.get_prompt("notes")
    assert unknown.value.error.code == -32602

    completion = await client.complete(
        t.PromptReference(type="ref/prompt", name="forecast"), {"name": "city", "value": "l"}
    )
    assert completion.completion.values == ["Lyon"]  # the fixed country reached the upstream as context

    moved = await client.get_prompt("wx__weather", {"country": "US", "city": "Austin"})  # more's, by its new name
    assert moved.messages[0].content == t.TextContent(type="text", text="Weather in Austin, US (metric)")


async def test_overrides_over_stdio(tmp_path: Path) -> None:
    """Over stdio in the 2026-07-28 era (the handshake era is the HTTP test's first client)."""
    config = write_config(tmp_path / "c.toml", upstreams(), policy=POLICY)
    async with Client(gateway_params(config), mode="2026-07-28", cache=None) as client:
        await exercise(client, "2026-07-28")


async def test_overrides_over_http_for_both_eras_and_a_reload_announces_new_ones(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c.toml", upstreams(), policy=POLICY, server=HTTP)
    changes = ListChangedWatcher()
    async with (
        running_gateway(path) as gw,
        Client(f"{gw.url}/mcp", mode="legacy", cache=None, message_handler=changes) as client,
    ):
        await exercise(client, "2025-11-25")
        async with Client(f"{gw.url}/mcp", mode="2026-07-28", cache=None) as modern:
            await exercise(modern, "2026-07-28")

        renamed = {**FORECAST, "name": "weather-report", "description_append": "Ask before travelling."}
        write_config(path, upstreams(renamed), policy=POLICY, server=HTTP)
        gw.process.send_signal(signal.SIGHUP)
        reloaded = await gw.wait_for_event("config_reloaded")
        assert (reloaded["stopped"], reloaded["started"]) == ([], [])  # overrides need no reconnect
        await changes.wait()
        listing = (await client.list_prompts()).prompts
        assert [p.name for p in listing] == ["weather-report", "wx__weather"]
        assert listing[0].description == "The team's weather prompt.\n\nAsk before travelling."
        with pytest.raises(MCPError):
            await client.get_prompt("forecast", {"city": "Lyon"})
