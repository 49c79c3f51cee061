"""Per-token shares inside the global bounds: one token holding many sessions cannot lock another out,
and open listen streams cannot starve stateless requests."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.integration.helpers import HTTP_HEADERS, INITIALIZE, demo_upstream, running_gateway, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

A_TOKEN, B_TOKEN = "a-token-0123456789", "b-token-0123456789"
BASE = HTTP_HEADERS
INIT = INITIALIZE
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
MODERN = {**BASE, "MCP-Protocol-Version": "2026-07-28"}


def modern(request_id: int, method: str, **params: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"_meta": ENVELOPE, **params}})


def config(tmp_path: Path, **server: Any) -> Path:
    tokens = [{"name": "a", "token": A_TOKEN}, {"name": "b", "token": B_TOKEN}]
    return write_config(
        tmp_path / "c.toml", [demo_upstream("writing", "writing")], server={"transport": "http", "port": 0, **server},
        tokens=tokens,
    )  # fmt: skip


async def test_one_token_holding_many_sessions_cannot_lock_another_out(tmp_path: Path) -> None:
    async with (
        running_gateway(config(tmp_path, max_sessions=8, max_sessions_per_identity=4)) as gateway,
        httpx.AsyncClient(base_url=gateway.url, timeout=20) as http,
    ):
        a_sessions = []
        for _ in range(10):  # more than its share and more than the whole: its own oldest idle ones make room
            response = await http.post("/mcp", json=INIT, headers={**BASE, "Authorization": f"Bearer {A_TOKEN}"})
            assert response.status_code == 200, response.text
            a_sessions.append(response.headers["mcp-session-id"])
        b = await http.post("/mcp", json=INIT, headers={**BASE, "Authorization": f"Bearer {B_TOKEN}"})
        assert b.status_code == 200, b.text  # used to be 503 until a's sessions expired, an hour later
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        a_headers = {**BASE, "Authorization": f"Bearer {A_TOKEN}"}
        evicted = await gateway.wait_for_event("session_ended")
        assert "evicted" in evicted["reason"]
        # An evicted session left memory, not its sealed id: it resumes, at the cost of a's own oldest
        # idle session, never b's (a is at its share).
        oldest = await http.post("/mcp", json=ping, headers={**a_headers, "Mcp-Session-Id": a_sessions[0]})
        assert oldest.status_code == 200
        b_ping = await http.post(
            "/mcp",
            json=ping,
            headers={**BASE, "Authorization": f"Bearer {B_TOKEN}", "Mcp-Session-Id": b.headers["mcp-session-id"]},
        )
        assert b_ping.status_code == 200


async def test_open_listen_streams_do_not_starve_stateless_requests(tmp_path: Path) -> None:
    async with (
        running_gateway(config(tmp_path, max_sessions=3, max_sessions_per_identity=3)) as gateway,
        httpx.AsyncClient(base_url=gateway.url, timeout=20) as http,
        AsyncExitStack() as streams,
    ):
        headers = {**MODERN, "Authorization": f"Bearer {A_TOKEN}", "Mcp-Method": "subscriptions/listen"}
        body = modern(1, "subscriptions/listen", notifications={"promptsListChanged": True})
        readers = []  # held: a reader collected early would close its stream
        for _ in range(3):
            stream = await streams.enter_async_context(http.stream("POST", "/mcp", content=body, headers=headers))
            readers.append(stream.aiter_lines())
            with anyio.fail_after(20):
                async for line in readers[-1]:  # acknowledged: the stream is being read, so it is counted
                    if line.startswith("data: "):
                        break
        with anyio.fail_after(20):  # admitted, it would stream until the gateway stops
            fourth = await http.post("/mcp", content=body, headers=headers)
        assert fourth.status_code == 503
        assert "too many streams open" in fourth.json()["error"]["message"]
        listing = {**MODERN, "Authorization": f"Bearer {A_TOKEN}", "Mcp-Method": "prompts/list"}
        listed = await http.post("/mcp", content=modern(2, "prompts/list"), headers=listing)
        assert listed.status_code == 200, listed.text  # used to be 503 while max_sessions streams were open
        assert listed.json()["result"]["prompts"]
