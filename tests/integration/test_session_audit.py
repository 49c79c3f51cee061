"""Session refusals over HTTP are audited as every refused request is: a session used with another
identity's credentials is refused as one that does not exist (404), and recorded with who asked."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.integration.helpers import demo_upstream, running_gateway, write_config
from tests.integration.test_http import INIT, JSON_HEADERS

pytestmark = pytest.mark.anyio

CI = "ci-token-0123456789abcdef"
OPS = "ops-token-0123456789abcdef"


def two_tokens_audited(tmp_path: Path) -> Path:
    """An HTTP gateway with two tokens (ci, ops) and its audit on stderr."""
    return write_config(
        tmp_path / "g.toml",
        [demo_upstream("writing", "writing")],
        server={"transport": "http", "port": 0, "audit": {}},
        tokens=[{"name": "ci", "token": CI}, {"name": "ops", "token": OPS}],
    )


async def test_another_identitys_session_is_refused_and_audited(tmp_path: Path) -> None:
    """A tester: only refusals at the door (401, 403, 421) were audited; a token using another token's
    session (404, the security-relevant one) and a request without its session id (400) were not."""
    config = two_tokens_audited(tmp_path)
    listing = {"jsonrpc": "2.0", "id": 7, "method": "prompts/list"}
    async with running_gateway(config) as gateway, httpx.AsyncClient(timeout=30) as http:
        url = f"{gateway.url}/mcp"
        opened = await http.post(url, json=INIT, headers={**JSON_HEADERS, "Authorization": f"Bearer {CI}"})
        session = opened.headers["mcp-session-id"]
        ops = {**JSON_HEADERS, "Authorization": f"Bearer {OPS}", "MCP-Protocol-Version": "2025-11-25"}
        stolen = await http.post(url, json=listing, headers={**ops, "Mcp-Session-Id": session})
        assert stolen.status_code == 404
        event = await gateway.wait_for_event("audit", outcome="refused", status=404)
        assert (event["who"], event["method"]) == ({"kind": "token", "name": "ops"}, "prompts/list")
        assert event["reason"] == "Session not found"
        missing = await http.post(url, json=listing, headers=ops)
        assert missing.status_code == 400
        await gateway.wait_for_event("audit", outcome="refused", status=400)


async def test_another_identitys_legacy_sse_session_is_refused_and_audited(tmp_path: Path) -> None:
    """The same over the legacy HTTP+SSE transport: a POST to another token's stream is a 404, audited."""
    config = two_tokens_audited(tmp_path)
    listing = {"jsonrpc": "2.0", "id": 8, "method": "prompts/list"}
    async with running_gateway(config) as gateway, httpx.AsyncClient(timeout=30) as http:
        ci = {"Authorization": f"Bearer {CI}", "Accept": "text/event-stream"}
        async with http.stream("GET", f"{gateway.url}/sse", headers=ci) as stream:
            endpoint = ""
            async for line in stream.aiter_lines():
                if line.startswith("data:"):
                    endpoint = line[len("data:") :].strip()
                    break
            ops = {"Authorization": f"Bearer {OPS}", "Content-Type": "application/json"}
            stolen = await http.post(f"{gateway.url}{endpoint}", json=listing, headers=ops)
            assert stolen.status_code == 404
            event = await gateway.wait_for_event("audit", outcome="refused", status=404)
            assert (event["who"], event["method"]) == ({"kind": "token", "name": "ops"}, "prompts/list")
