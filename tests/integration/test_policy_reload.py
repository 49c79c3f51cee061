"""A reload applies the tokens' policies and the views at once, to requests and to sessions already
open; what else of ``[server]`` it changes waits for a restart, and the warning names each key."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.integration.helpers import demo_upstream, running_gateway, write_config
from tests.integration.test_http import authorized

pytestmark = pytest.mark.anyio

CI = "ci-token-0123456789abcdef"
OPS = "ops-token-0123456789abcdef"


async def test_a_tokens_new_policy_reaches_its_open_sessions_and_restart_only_keys_are_named(
    tmp_path: Path,
) -> None:
    """A tester added a deny to a token's policy and sent SIGHUP: the gateway logged that ``[server]``
    changes wait for a restart (naming nothing) and served the old policy, while ``list --token`` and
    ``explain`` (which read the file) said the prompt was hidden."""
    upstreams = [demo_upstream("writing", "writing"), demo_upstream("eng", "engineering")]
    http = {"transport": "http", "port": 0}
    config = write_config(tmp_path / "g.toml", upstreams, server=http, tokens=[{"name": "ci", "token": CI}])
    async with running_gateway(config) as gateway, authorized(f"{gateway.url}/mcp", CI) as client:
        listed = {p.name for p in (await client.list_prompts()).prompts}
        assert {"writing__summarize", "eng__code_review"} <= listed
        denied = [{"name": "ci", "token": CI, "policy": {"deny": ["writing__*"]}}]
        write_config(config, upstreams, server={**http, "port": 1}, tokens=[*denied, {"name": "ops", "token": OPS}])
        gateway.process.send_signal(signal.SIGHUP)
        ignored = await gateway.wait_for_event("reload_server_settings_ignored")
        assert ignored["settings"] == ["server.port", "server.tokens"]  # a new token waits; so do policies then
        await gateway.wait_for_event("config_reloaded")
        assert "writing__summarize" in {p.name for p in (await client.list_prompts()).prompts}

        write_config(config, upstreams, server=http, tokens=denied)  # the same tokens, a new policy: at once
        gateway.events.clear()
        gateway.process.send_signal(signal.SIGHUP)
        await gateway.wait_for_event("config_reloaded")
        assert not [e for e in gateway.events if e.get("event") == "reload_server_settings_ignored"]
        now = {p.name for p in (await client.list_prompts()).prompts}
        assert "eng__code_review" in now
        assert not [name for name in now if name.startswith("writing__")]
        async with authorized(f"{gateway.url}/mcp", CI) as later:
            assert {p.name for p in (await later.list_prompts()).prompts} == now
