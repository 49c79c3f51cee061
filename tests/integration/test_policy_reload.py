"""A reload applies the tokens' policies and the views at once, to requests and to sessions already
open; what else of ``[server]`` it changes waits for a restart, and the warning names each key."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.integration.helpers import demo_upstream, running_gateway, sdk_upstream, write_config
from tests.integration.test_http import INIT, authorized

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
    async with (
        running_gateway(config) as gateway,
        authorized(f"{gateway.url}/mcp", CI) as client,
        httpx.AsyncClient(timeout=30) as raw,
    ):
        listed = {p.name for p in (await client.list_prompts()).prompts}
        assert {"writing__summarize", "eng__code_review"} <= listed
        # ci's policy tightened, a token added beside it (a reviewer: that held every policy back) and the
        # port changed: the policy applies at once, the new token and the port wait for a restart
        denied = {"name": "ci", "token": CI, "policy": {"deny": ["writing__*"]}}
        write_config(config, upstreams, server={**http, "port": 1}, tokens=[{"name": "ops", "token": OPS}, denied])
        gateway.process.send_signal(signal.SIGHUP)
        ignored = await gateway.wait_for_event("reload_server_settings_ignored")
        assert ignored["settings"] == ["server.port", "server.tokens"]
        await gateway.wait_for_event("config_reloaded")
        now = {p.name for p in (await client.list_prompts()).prompts}  # the session open before the reload
        assert "eng__code_review" in now
        assert not [name for name in now if name.startswith("writing__")]
        async with authorized(f"{gateway.url}/mcp", CI) as later:
            assert {p.name for p in (await later.list_prompts()).prompts} == now
        headers = {"Authorization": f"Bearer {OPS}", "Accept": "application/json, text/event-stream"}
        assert (await raw.post(f"{gateway.url}/mcp", json=INIT, headers=headers)).status_code == 401
        # only ci's policy changed (the port back as it runs): nothing waits, and no warning says otherwise
        # (a tester saw every reload, even one that changed nothing, name server.tokens)
        write_config(config, upstreams, server=http, tokens=[{**denied, "policy": {"deny": ["eng__*"]}}])
        gateway.process.send_signal(signal.SIGHUP)
        await gateway.wait_for_event("config_reloaded")
        assert not [e for e in gateway.events if e.get("event") == "reload_server_settings_ignored"]
        again = {p.name for p in (await client.list_prompts()).prompts}
        assert "writing__summarize" in again
        assert not [name for name in again if name.startswith("eng__")]


async def test_a_reload_that_changes_nothing_tells_no_client(tmp_path: Path) -> None:
    """A tester added a comment to the config under ``--watch``: every session was sent list_changed for
    prompts and skills (a reload's fan-out says "anything may have changed"). A config that reads as the
    running one changes no list; the next fan-out is the upstream's own, for its prompts alone."""
    config = write_config(
        tmp_path / "g.toml",
        [sdk_upstream("dyn", "dynamic")],
        server={"transport": "http", "port": 0},
        gateway={"list_changed_debounce_s": 0},  # a reload's fan-out, if any, goes before the change below
    )
    async with running_gateway(config) as gateway:
        await gateway.wait_for_event("upstream_state", upstream="dyn", state="ready")
        config.write_text(config.read_text() + "\n# a comment, and nothing else\n")
        gateway.process.send_signal(signal.SIGHUP)
        reloaded = await gateway.wait_for_event("config_reloaded")
        assert reloaded["unchanged"] is True
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
            await client.get_prompt("dyn__add", {"name": "added"})  # the upstream announces its change
        told = await gateway.wait_for_event("list_changed_broadcast")
        assert told["lists"] == ["prompts"]  # a reload's would say ["prompts", "skills"]
