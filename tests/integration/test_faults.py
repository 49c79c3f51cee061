"""Upstreams that crash, hang, lie and flood: the gateway contains each, and the others keep serving."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as t
import pytest
from mcp import Client, MCPError

from tests.integration.helpers import (
    ROOT,
    ListChangedWatcher,
    demo_upstream,
    gateway_http,
    gateway_params,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def faulty(namespace: str = "bad", **extra: Any) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "command": sys.executable,
        "args": ["-m", "tests.servers.faulty"],
        "cwd": str(ROOT),
        "timeout_s": 2,
        **extra,
    }


@pytest.fixture
async def messages() -> ListChangedWatcher:
    return ListChangedWatcher()


@pytest.fixture
async def client(tmp_path: Path, messages: ListChangedWatcher) -> AsyncIterator[Client]:
    config = write_config(
        tmp_path / "c.toml",
        [demo_upstream("writing", "writing"), faulty()],
        gateway={"max_message_bytes": 1024 * 1024, "restart_initial_s": 0.2},
    )
    async with Client(gateway_params(config), mode="legacy", cache=None, message_handler=messages) as client:
        yield client


async def expect_upstream_error(client: Client, name: str, *fragments: str) -> None:
    with pytest.raises(MCPError) as info:
        await client.get_prompt(name)
    assert info.value.error.code == -32603
    for fragment in fragments:
        assert fragment in info.value.error.message
    assert (await client.get_prompt("writing__summarize", {"text": "still here"})).messages  # the gateway serves on


MISBEHAVIOURS: list[tuple[str, tuple[str, ...]]] = [
    ("bad__hang", ("Upstream 'bad' did not answer prompts/get within 2.0s",)),
    ("bad__garbage", ("Upstream 'bad' did not answer",)),
    ("bad__wrong_id", ("Upstream 'bad' did not answer",)),
    # (an answer over the size limit was skipped, and its request left to time out: "did not answer")
    ("bad__huge", ("Upstream 'bad'", "its answer is over the size limit (1048576 bytes)")),
    ("bad__huge_id_last", ("Upstream 'bad'", "its answer is over the size limit (1048576 bytes)")),
    ("bad__bad_result", ("Upstream 'bad' sent an invalid prompts/get result", "messages.0.role")),
]


async def test_a_misbehaving_upstream_is_contained(client: Client) -> None:
    """One misbehaviour after another from the same upstream: each fails only its own request, the gateway
    serves on, and the faulty upstream itself still answers its good prompt."""
    for prompt, fragments in MISBEHAVIOURS:
        await expect_upstream_error(client, prompt, *fragments)
        assert (await client.get_prompt("bad__ok")).messages


async def test_a_crash_mid_request_fails_at_once_and_the_upstream_comes_back(
    client: Client, messages: ListChangedWatcher
) -> None:
    started = anyio.current_time()
    await expect_upstream_error(client, "bad__crash", "Upstream 'bad'")
    assert anyio.current_time() - started < 2  # not the 2 s timeout: the dead peer fails its requests at once
    while True:
        await messages.wait()
        names = [p.name for p in (await client.list_prompts()).prompts]
        if "bad__ok" in names:
            break
    assert (await client.get_prompt("bad__ok")).messages


async def get_with_progress(client: Client, name: str) -> tuple[t.GetPromptResult, list[tuple[float, float | None]]]:
    """The SDK picks the progress token itself and routes progress for it to the callback."""
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    request = t.GetPromptRequest(params=t.GetPromptRequestParams(name=name))
    result = await client.session.send_request(request, t.GetPromptResult, progress_callback=on_progress)
    return result, seen


async def test_progress_reaches_the_client_under_its_own_token(client: Client) -> None:
    result, progress = await get_with_progress(client, "bad__progress")
    content = result.messages[0].content
    assert isinstance(content, t.TextContent)
    assert content.text.startswith("progressed with token gw-progress-")  # the upstream never saw the client's
    assert progress == [(1, 2), (2, 2)]


async def cancel_status(client: Client) -> dict[str, Any]:
    return json.loads((await client.get_prompt("bad__cancel_status")).messages[0].content.text)  # type: ignore[union-attr,no-any-return]


async def test_cancellation_reaches_the_upstream_under_its_own_request_id(client: Client) -> None:
    """Cancelled once the upstream has the request (a fixed 0.5 s could end before it was relayed, on a
    loaded machine, and then there was nothing upstream to cancel)."""
    slow_before = len((await cancel_status(client))["slow"])
    async with anyio.create_task_group() as tg:
        tg.start_soon(client.get_prompt, "bad__slow")
        with anyio.fail_after(30):
            while len((await cancel_status(client))["slow"]) == slow_before:
                await anyio.sleep(0.02)  # the upstream says nothing when a request arrives: asked again
        tg.cancel_scope.cancel()
    with anyio.fail_after(10):
        while True:
            status = json.loads((await client.get_prompt("bad__cancel_status")).messages[0].content.text)  # type: ignore[union-attr]
            if status["cancelled"]:
                break
    assert status["cancelled"] == status["slow"]  # the upstream-side id, which the client never knew


async def test_a_list_changed_storm_is_absorbed(client: Client, messages: ListChangedWatcher) -> None:
    await client.get_prompt("bad__storm", {"count": "1000"})
    await messages.wait()
    await client.get_prompt("writing__summarize", {"text": "after the storm"})
    assert messages.count < 20


async def test_listing_leaves_out_an_upstream_that_fails_or_is_slow(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml",
        [
            demo_upstream("writing", "writing"),
            faulty("cursor", env={"FAULT_LIST": "nonstring_cursor"}),
            faulty("slow", env={"FAULT_LIST_DELAY": "5"}, timeout_s=1),
        ],
    )
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        listing = await client.list_prompts()
        assert [p.name for p in listing.prompts] == ["writing__summarize", "writing__translate", "writing__proofread"]
        assert listing.meta == {"prompt-gateway/unavailable": ["cursor", "slow"]}
        assert listing.next_cursor is None


async def test_progress_over_http_arrives_on_the_requests_own_stream(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", [faulty()], server={"transport": "http", "port": 0})
    async with gateway_http(config) as base, Client(f"{base}/mcp", mode="legacy", cache=None) as client:
        _, progress = await get_with_progress(client, "bad__progress")
        assert progress == [(1, 2), (2, 2)]


async def test_a_saturated_upstream_answers_a_clean_error(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", [faulty(timeout_s=5)], gateway={"max_requests_per_upstream": 1})
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        await client.list_prompts()  # the routing index is built before the one slot is taken
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.get_prompt, "bad__slow", {"seconds": "1"})
            await anyio.sleep(0.2)  # the slow request holds the only slot; there is no event for that
            with pytest.raises(MCPError) as info:
                await client.get_prompt("bad__ok")
        assert info.value.error.code == -32603
        assert info.value.error.message == "Upstream 'bad' is saturated (1 requests in flight)"


async def test_an_upstream_that_comes_up_after_start_up_is_announced(
    tmp_path: Path, messages: ListChangedWatcher
) -> None:
    """Nothing was ready when start-up dropped its own announcements; an upstream connecting later must
    still reach clients as a list change (start-up once left the debouncer deaf for good)."""
    gate = tmp_path / "open"
    late = {
        "namespace": "late",
        "command": sys.executable,
        "args": ["-c", f"import os, runpy, sys\nif not os.path.exists({str(gate)!r}): sys.exit(1)\n"
                 "runpy.run_module('gateway.demo.writing', run_name='__main__')"],
        "cwd": str(ROOT),
    }  # fmt: skip
    config = write_config(tmp_path / "c.toml", [late], gateway={"restart_initial_s": 0.1, "restart_max_s": 0.2})
    async with Client(gateway_params(config), mode="legacy", cache=None, message_handler=messages) as client:
        assert (await client.list_prompts()).prompts == []
        gate.touch()
        await messages.wait()
        names = [prompt.name for prompt in (await client.list_prompts()).prompts]
        assert names
        assert all(name.startswith("late__") for name in names)


async def test_an_upstream_cannot_reach_another_upstreams_request_with_forged_progress(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", [faulty("victim", timeout_s=20), faulty("forger", timeout_s=20)])
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        await client.list_prompts()  # both indexes known: the two requests below are forwarded at once
        seen: list[str | None] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(message)

        finished = anyio.Event()

        async def slow_with_progress() -> None:
            params = t.GetPromptRequestParams(name="victim__slow", arguments={"seconds": "3"})
            request = t.GetPromptRequest(params=params)
            await client.session.send_request(request, t.GetPromptResult, progress_callback=on_progress)
            finished.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_with_progress)
            forged = await client.get_prompt("forger__forge_progress", {"count": "300"})
            assert forged.messages[0].content.text == "forged"  # type: ignore[union-attr]
            with anyio.fail_after(20):
                await finished.wait()
        assert "forged" not in seen


async def test_a_down_upstream_answers_hidden_and_unknown_names_alike_and_is_named_only_to_who_sees_it(
    tmp_path: Path,
) -> None:
    def dead(namespace: str) -> dict[str, Any]:
        return {"namespace": namespace, "command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}

    config = write_config(
        tmp_path / "c.toml",
        [demo_upstream("writing", "writing"), dead("docs"), dead("hidden")],
        policy={"deny": ["docs__secret_plan", "hidden__*"]},
        gateway={"max_restarts": 0},
    )
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        listing = await client.list_prompts()
        assert listing.meta == {"prompt-gateway/unavailable": ["docs"]}
        outcomes = set()
        for name in ("docs__secret_plan", "docs__secret_plam"):
            with pytest.raises(MCPError) as info:
                await client.get_prompt(name)
            outcomes.add((info.value.error.code, info.value.error.message))
        failed = "Upstream 'docs' has failed and is not restarted (`prompt-gateway check` and the log say why)"
        assert outcomes == {(-32603, failed)}
        with pytest.raises(MCPError) as info:
            await client.get_prompt("hidden__anything")
        assert (info.value.error.code, info.value.error.message) == (-32602, "Unknown prompt: hidden__anything")
