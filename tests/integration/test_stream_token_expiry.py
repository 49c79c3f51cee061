"""A stream opened with an access token ends when that token stops being accepted: a 2026-07-28
``subscriptions/listen`` with its result, a handshake-era session's GET stream, a legacy HTTP+SSE
stream and the operator page's event stream by closing. Before, each went on for as long as the
connection lasted, an expired token (or a person whose access was taken away at the provider) still
told of every change. The tokens are signed with the real provider's key, expiring within the
gateway's 30 s leeway so that they are accepted for a few seconds more; a stream opened with a token
good for an hour stays open meanwhile."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import jwt
import pytest

from tests.integration.helpers import HTTP_HEADERS, INITIALIZE
from tests.integration.test_identity import ALICE, OPERATOR, Setup, identity_setup, token_for
from tests.integration.test_modern import ENVELOPE

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.services]

LEEWAY_S = 30  # [server.auth] leeway_s, the default
LEFT_S = 3.0
"""How long the short token is accepted after it is signed."""


async def short_token(setup: Setup, who: dict[str, Any] = ALICE, scope: str = "prompts:read") -> tuple[str, float]:
    """A person's token from the provider, signed again to expire so that the gateway accepts it for
    ``LEFT_S`` more seconds; and when that ends (Unix time)."""
    claims = jwt.decode(await token_for(setup, who, scope), options={"verify_signature": False})
    exp = int(time.time() + LEFT_S) - LEEWAY_S
    return setup.key.sign({**claims, "iat": exp - 600, "exp": exp}), float(exp + LEEWAY_S)


async def data_lines(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if line.startswith("data: ") and line[6:].startswith("{"):
            yield json.loads(line[6:])


def listen(request_id: int) -> dict[str, Any]:
    params = {"_meta": dict(ENVELOPE), "notifications": {"promptsListChanged": True}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen", "params": params}


def modern_headers(token: str) -> dict[str, str]:
    return {
        **HTTP_HEADERS,
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "subscriptions/listen",
    }


async def test_a_listen_stream_ends_with_its_result_when_its_token_expires(tmp_path: Path) -> None:
    async with identity_setup(tmp_path) as setup, httpx.AsyncClient(timeout=60) as http:
        short, ends_at = await short_token(setup)
        lasting = await token_for(setup, ALICE)
        async with (
            http.stream("POST", setup.url, json=listen(1), headers=modern_headers(lasting)) as kept,
            http.stream("POST", setup.url, json=listen(2), headers=modern_headers(short)) as expiring,
        ):
            assert (kept.status_code, expiring.status_code) == (200, 200)
            kept_messages, expiring_messages = data_lines(kept), data_lines(expiring)
            assert (await anext(kept_messages))["method"] == "notifications/subscriptions/acknowledged"
            assert (await anext(expiring_messages))["method"] == "notifications/subscriptions/acknowledged"
            with anyio.fail_after(LEFT_S + 30):
                result = await anext(expiring_messages)
            assert time.time() >= ends_at - 0.5  # not before the token's time (the clocks are the same)
            assert result["id"] == 2
            assert result["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 2
            assert await anext(expiring_messages, None) is None  # and the stream is over
            # the lasting token's stream is still open: the gauge of open listens counts it alone
            base = setup.url.removesuffix("/mcp")
            with anyio.fail_after(30):
                while (listening := open_listens((await http.get(f"{base}/metrics")).text)) > 1:
                    await anyio.sleep(0.05)
            assert listening == 1


def open_listens(metrics: str) -> float:
    line = next(line for line in metrics.splitlines() if line.startswith("prompt_gateway_sessions "))
    return float(line.split()[1])


async def test_a_sessions_stream_ends_when_the_token_that_opened_it_expires(tmp_path: Path) -> None:
    async with identity_setup(tmp_path) as setup, httpx.AsyncClient(timeout=60) as http:
        short, ends_at = await short_token(setup)
        auth = {**HTTP_HEADERS, "Authorization": f"Bearer {short}"}
        opened = await http.post(setup.url, json=INITIALIZE, headers=auth)
        assert opened.status_code == 200
        session = {**auth, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
        notified = await http.post(
            setup.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
        )
        assert notified.status_code == 202
        async with http.stream("GET", setup.url, headers=session) as stream:
            assert stream.status_code == 200
            with anyio.fail_after(LEFT_S + 30):
                await stream.aread()  # until the gateway ends it
        assert time.time() >= ends_at - 0.5
        again = await http.post(setup.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=session)
        assert again.status_code == 401  # the token is refused from then on, as before


async def test_a_legacy_sse_stream_ends_when_its_token_expires(tmp_path: Path) -> None:
    async with identity_setup(tmp_path) as setup, httpx.AsyncClient(timeout=60) as http:
        short, ends_at = await short_token(setup)
        sse = setup.url.removesuffix("/mcp") + "/sse"
        headers = {"Accept": "text/event-stream", "Authorization": f"Bearer {short}"}
        async with http.stream("GET", sse, headers=headers) as stream:
            assert stream.status_code == 200
            with anyio.fail_after(LEFT_S + 30):
                body = await stream.aread()
        assert b"event: endpoint" in body
        assert time.time() >= ends_at - 0.5


async def test_the_operator_pages_stream_ends_when_the_access_token_that_opened_it_expires(tmp_path: Path) -> None:
    admin = '[server.admin]\nenabled = true\nscope = "prompts:admin"\n'
    async with identity_setup(tmp_path, extra=admin) as setup, httpx.AsyncClient(timeout=60) as http:
        short, ends_at = await short_token(setup, OPERATOR, "prompts:read prompts:admin")
        events = f"{setup.base}/admin/events"
        async with http.stream("GET", events, headers={"Authorization": f"Bearer {short}"}) as stream:
            assert stream.status_code == 200
            with anyio.fail_after(LEFT_S + 30):
                body = await stream.aread()
        assert b"event: upstreams" in body  # it was served until then
        assert time.time() >= ends_at - 0.5
