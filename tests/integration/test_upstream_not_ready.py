"""What a caller is told about an upstream that cannot answer yet: "still starting" (and for how long)
while it is, "down" and when it is restarted while it backs off, "failed" once given up; no longer
"not connected" for all three. Upstreams are held at a gate, so each state is sure, not a timing."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from mcp import Client, MCPError

from tests.integration.helpers import Gate, demo_upstream, running_gateway, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

EXITS_AT_ONCE = [sys.executable, "-c", "raise SystemExit(3)"]


async def error_of(client: Client, name: str) -> str:
    with pytest.raises(MCPError) as info:
        await client.get_prompt(name)
    assert info.value.error.code == -32603
    return info.value.error.message


@pytest.mark.parametrize("max_restarts", [0, 1])
async def test_a_get_says_still_starting_then_down_or_failed(tmp_path: Path, max_restarts: int) -> None:
    held, failing = Gate(tmp_path, "held"), Gate(tmp_path, "failing")
    config = write_config(
        tmp_path / "gateway.toml",
        [
            demo_upstream("writing", "writing"),
            held.upstream("slow", [sys.executable, "-m", "gateway.demo.writing"]),
            failing.upstream("broken", EXITS_AT_ONCE, protocol="legacy"),  # no probe: no retry at once
        ],
        gateway={"startup_wait_s": 0, "restart_initial_s": 60, "restart_max_s": 60, "max_restarts": max_restarts},
        server={"transport": "http", "port": 0},
    )
    async with running_gateway(config) as gateway, Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
        await gateway.wait_for_event("upstream_state", upstream="writing", state="ready")
        starting = await error_of(client, "slow__anything")
        assert re.fullmatch(r"Upstream 'slow' is still starting \(for \d+\.\d s\)", starting), starting
        assert re.fullmatch(
            r"Upstream 'broken' is still starting \(for \d+\.\d s\)", await error_of(client, "broken__x")
        )
        await failing.open()
        if max_restarts:
            await gateway.wait_for_event("upstream_state", upstream="broken", state="backing-off")
            down = await error_of(client, "broken__x")
            assert re.fullmatch(r"Upstream 'broken' is down \(for \d+\.\d s\); it is restarted in \d+\.\d s", down), (
                down
            )
        else:
            await gateway.wait_for_event("upstream_state", upstream="broken", state="failed")
            failed = await error_of(client, "broken__x")
            assert failed == (
                "Upstream 'broken' has failed and is not restarted (`prompt-gateway check` and the log say why)"
            )
        assert (await client.get_prompt("writing__proofread", {"text": "x"})).messages  # the others serve
