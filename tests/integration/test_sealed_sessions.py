"""Sealed session ids between real gateway processes: a session begun on one is served by another with
the same ``[cluster] session_keys`` and survives a restart; a tampered id and one its client deleted
answer 404 (other keys: tests/test_session_ids.py). (Three replicas behind HAProxy with Redis: test_scale_out.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.integration.helpers import HTTP_HEADERS, INITIALIZE, demo_upstream, running_gateway, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
KEYS = {"session_keys": ["a-session-key-of-32-characters!!", "an-older-key-still-accepted-here"]}


def config(path: Path, cluster: dict[str, Any] | None = KEYS) -> Path:
    server = {"transport": "http", "port": 0}
    return write_config(path, [demo_upstream("writing", "writing")], server=server, cluster=cluster)


ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def another_spelling(session_id: str) -> str:
    """The id with the unused low bit of its last base64url character set otherwise: the same bytes."""
    assert len(session_id.partition(".")[2]) % 4 in (2, 3), "this id's last character has no unused bits"
    return session_id[:-1] + ALPHABET[ALPHABET.index(session_id[-1]) ^ 1]


async def call(client: httpx.AsyncClient, url: str, session_id: str, method: str, id_: int = 2) -> httpx.Response:
    message = {"jsonrpc": "2.0", "id": id_, "method": method}
    headers = {**HTTP_HEADERS, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
    return await client.post(url, json=message, headers=headers)


async def test_a_session_begun_on_one_gateway_is_served_by_another_with_the_keys(tmp_path: Path) -> None:
    async with (
        running_gateway(config(tmp_path / "a.toml")) as a,
        running_gateway(config(tmp_path / "b.toml")) as b,
        httpx.AsyncClient(timeout=20) as http,
    ):
        opened = await http.post(f"{a.url}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)
        assert opened.status_code == 200
        session_id = opened.headers["mcp-session-id"]
        assert session_id.startswith("s1.")
        for gateway in (b, a, b):
            listed = await call(http, f"{gateway.url}/mcp", session_id, "prompts/list")
            assert listed.status_code == 200, listed.text
            assert "writing__summarize" in listed.text
        resumed = await b.wait_for_event("session_resumed")
        assert resumed["session"] == session_id[:8]

        # A stream resumed on another replica with the Last-Event-ID the first one numbered: nothing to
        # replay there, so the client is told to list again (it would otherwise skip that many new events).
        headers = {**HTTP_HEADERS, "Accept": "text/event-stream", "Mcp-Session-Id": session_id, "Last-Event-ID": "7"}
        with anyio.fail_after(10):
            async with http.stream("GET", f"{b.url}/mcp", headers=headers) as stream:
                assert stream.status_code == 200
                async for line in stream.aiter_lines():
                    if line.startswith("data:"):
                        assert json.loads(line[5:])["method"] == "notifications/prompts/list_changed"
                        break

        tampered = session_id[:-4] + ("AAAA" if not session_id.endswith("AAAA") else "BBBB")
        assert (await call(http, f"{b.url}/mcp", tampered, "prompts/list")).status_code == 404

        assert (await call(http, f"{a.url}/mcp", another_spelling(session_id), "prompts/list")).status_code == 404
        deleted = await http.delete(f"{b.url}/mcp", headers={**HTTP_HEADERS, "Mcp-Session-Id": session_id})
        assert deleted.status_code == 200
        for gateway in (a, b):  # the deleted id under another spelling of its bytes opens nowhere
            assert (await call(http, f"{b.url}/mcp", session_id, "prompts/list")).status_code == 404
            assert (
                await call(http, f"{gateway.url}/mcp", another_spelling(session_id), "prompts/list")
            ).status_code == 404


async def test_a_session_outlives_a_restart_of_its_gateway(tmp_path: Path) -> None:
    path = config(tmp_path / "a.toml")
    async with httpx.AsyncClient(timeout=20) as http:
        async with running_gateway(path) as first:
            opened = await http.post(f"{first.url}/mcp", json=INITIALIZE, headers=HTTP_HEADERS)
            session_id = opened.headers["mcp-session-id"]
        async with running_gateway(path) as second:
            listed = await call(http, f"{second.url}/mcp", session_id, "prompts/list")
            assert listed.status_code == 200, listed.text
