"""Hot reload (SIGHUP and --watch) and graceful shutdown, driven by signals as an operator would."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client

from tests.integration.helpers import (
    ROOT,
    ListChangedWatcher,
    demo_upstream,
    gateway_command,
    gateway_params,
    process_gone,
    running_gateway,
    sdk_upstream,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
HTTP = {"transport": "http", "port": 0}


def slow_upstream(**extra: Any) -> dict[str, Any]:
    return {
        "namespace": "bad",
        "command": sys.executable,
        "args": ["-m", "tests.servers.faulty"],
        "cwd": str(ROOT),
        **extra,
    }


async def names(client: Client) -> list[str]:
    return [p.name for p in (await client.list_prompts()).prompts]


async def test_sighup_applies_a_new_config_in_place_and_rejects_a_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    write_config(path, [demo_upstream("writing", "writing"), demo_upstream("eng", "engineering")], server=HTTP)
    changes = ListChangedWatcher()
    async with (
        running_gateway(path) as gw,
        Client(f"{gw.url}/mcp", mode="legacy", cache=None, message_handler=changes) as client,
    ):
        assert "eng__code_review" in await names(client)
        write_config(
            path,
            [demo_upstream("writing", "writing"), sdk_upstream("dyn", "dynamic")],
            server=HTTP,
            policy={"deny": ["writing__translate"]},
        )
        gw.process.send_signal(signal.SIGHUP)
        reloaded = await gw.wait_for_event("config_reloaded")
        assert (reloaded["stopped"], reloaded["started"], reloaded["kept"]) == (["eng"], ["dyn"], ["writing"])
        after = await names(client)
        while "dyn__add" not in after:  # eng leaving and dyn arriving are announced as they happen
            await changes.wait(30)
            after = await names(client)
        assert "writing__summarize" in after
        assert not any(n.startswith("eng__") for n in after)
        assert "writing__translate" not in after  # the new global policy applies to the kept upstream too

        path.write_text("[[upstreams]]\nnamespace = 'bad name'\ncommand = 'x'\n")
        gw.process.send_signal(signal.SIGHUP)
        rejected = await gw.wait_for_event("reload_rejected")
        assert "upstreams[0].namespace" in rejected["error"]
        assert await names(client) == after  # the running config keeps serving

        path.write_text("")  # truncated mid-write: used to stop every upstream
        gw.process.send_signal(signal.SIGHUP)
        rejected = await gw.wait_for_event("reload_rejected")
        assert "empty" in rejected["error"]
        assert await names(client) == after


async def test_watch_reloads_when_the_file_changes(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c.toml", [demo_upstream("writing", "writing")], server=HTTP)
    changes = ListChangedWatcher()
    async with (
        running_gateway(path, "--watch") as gw,
        Client(f"{gw.url}/mcp", mode="legacy", cache=None, message_handler=changes) as client,
    ):
        write_config(path, [demo_upstream("writing", "writing"), demo_upstream("eng", "engineering")], server=HTTP)
        await gw.wait_for_event("config_reloaded")
        while "eng__code_review" not in await names(client):
            await changes.wait(30)


async def test_sigterm_lets_requests_in_flight_finish_over_http(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c.toml", [slow_upstream()], server=HTTP, gateway={"shutdown_grace_s": 20})
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    slow = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "prompts/get",
        "params": {"name": "bad__slow", "arguments": {"seconds": "1.5"}},
    }
    async with running_gateway(path) as gw, httpx.AsyncClient(timeout=30) as http:
        started = await http.post(f"{gw.url}/mcp", json=init, headers=headers)
        headers["Mcp-Session-Id"] = started.headers["mcp-session-id"]
        answers: list[dict[str, Any]] = []

        async def slow_request() -> None:
            answers.append((await http.post(f"{gw.url}/mcp", json=slow, headers=headers)).json())

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_request)
            await anyio.sleep(0.3)  # let the request reach the upstream; there is no event for "in flight"
            gw.process.send_signal(signal.SIGTERM)
            await gw.wait_for_event("shutting_down")
        assert answers[0]["result"]["messages"][0]["content"]["text"] == "slow answer"
        with anyio.fail_after(30):
            assert await gw.process.wait() == 0
        with pytest.raises(httpx.ConnectError):
            await http.post(f"{gw.url}/mcp", json=init, headers=headers)


async def test_stdin_closing_lets_requests_in_flight_finish(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c.toml", [slow_upstream()])
    async with await anyio.open_process(gateway_command(path, "serve"), cwd=ROOT) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        for line in (
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
            b'"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}',
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
            b'{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"bad__slow","arguments":{"seconds":"1"}}}',
        ):
            await process.stdin.send(line + b"\n")
        await process.stdin.aclose()  # the client is done sending, but still reads
        output = b""
        with anyio.fail_after(30):
            async for chunk in process.stdout:
                output += chunk
            assert await process.wait() == 0
        answers = [line for line in output.splitlines() if b'"id":2' in line]
        assert b"slow answer" in answers[0]


def stubborn(namespace: str, tmp_path: Path, *, deaf: bool = False) -> dict[str, Any]:
    """A server that runs on after its stdin ends (as mcp-server-sqlite does), with a child in its group
    and a daemon out of it; ``deaf`` ones ignore SIGTERM too. Their pids go to ``tmp_path / "pids"``."""
    env = {"STUBBORN_PIDS": str(tmp_path / "pids"), "STUBBORN_IGNORE_TERM": "1" if deaf else "0"}
    return {**sdk_upstream(namespace, "stubborn"), "env": env}


def recorded_pids(tmp_path: Path, count: int) -> list[int]:
    pids = [int(line) for line in (tmp_path / "pids").read_text().split()]
    assert len(pids) == count
    assert not any(process_gone(pid) for pid in pids)
    return pids


async def all_gone(pids: list[int]) -> None:
    """Every one of ``pids`` exits, within a bound generous for a busy machine (processes outside the
    gateway's own children give no event to await)."""
    with anyio.fail_after(30):
        while not all(process_gone(pid) for pid in pids):
            await anyio.sleep(0.05)


async def test_the_sdk_stdio_client_leaving_stops_servers_that_ignore_end_of_input(tmp_path: Path) -> None:
    """The SDK's stdio client closes the gateway's stdin, waits 2 s, SIGTERMs it, waits 2 s more and
    SIGKILLs its process group, which the upstreams (each in a session of its own) are not in. The
    gateway gave a server that ignores end of input 2 s, and the SIGTERM then ended the gateway
    mid-stop: the server ran on, with what it had started."""
    config = write_config(tmp_path / "c.toml", [stubborn("calm", tmp_path), stubborn("deaf", tmp_path, deaf=True)])
    async with Client(gateway_params(config), cache=None) as client:
        assert {p.name for p in (await client.list_prompts()).prompts} == {"calm__stay", "deaf__stay"}
        pids = recorded_pids(tmp_path, 6)
    await all_gone(pids)


async def test_sigterm_while_upstreams_are_stopping_lets_the_stop_finish(tmp_path: Path) -> None:
    """End of input starts the stop; a SIGTERM arriving meanwhile used to end the gateway at once (its
    signal handler had already gone), leaving the upstreams still being stopped running."""
    config = write_config(tmp_path / "c.toml", [stubborn("calm", tmp_path), stubborn("deaf", tmp_path, deaf=True)])
    command = [*gateway_command(config, "serve"), "--log-level", "info"]
    async with await anyio.open_process(command, cwd=ROOT) as process:
        assert process.stdin is not None
        assert process.stderr is not None
        events = BufferedByteReceiveStream(process.stderr)

        async def next_event(name: str, **fields: Any) -> dict[str, Any]:
            while True:
                event = json.loads(await events.receive_until(b"\n", 1 << 20))
                if event.get("event") == name and fields.items() <= event.items():
                    return event

        with anyio.fail_after(60):
            await next_event("upstream_state", state="ready")
            await next_event("upstream_state", state="ready")
        pids = recorded_pids(tmp_path, 6)
        await process.stdin.aclose()
        with anyio.fail_after(30):
            await next_event("upstream_state", upstream="calm", state="stopped")  # deaf's stop goes on
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            assert await process.wait() == 0
    await all_gone(pids)


async def test_sigterm_stops_every_upstream_and_their_processes(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml", [stubborn("calm", tmp_path), stubborn("deaf", tmp_path, deaf=True)], server=HTTP
    )
    async with running_gateway(config) as gw:
        await gw.wait_for_event("upstream_state", state="ready")
        await gw.wait_for_event("upstream_state", state="ready")
        pids = recorded_pids(tmp_path, 6)
        gw.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            assert await gw.process.wait() == 0
    await all_gone(pids)


async def test_a_second_signal_kills_what_remains_and_exits(tmp_path: Path) -> None:
    """The first signal starts the stop (a deaf server takes its full course to end); the second goes
    straight to SIGKILL of every process the upstreams left, and the gateway exits."""
    config = write_config(tmp_path / "c.toml", [stubborn("deaf", tmp_path, deaf=True)], server=HTTP)
    async with running_gateway(config) as gw:
        await gw.wait_for_event("upstream_state", state="ready")
        pids = recorded_pids(tmp_path, 3)
        gw.process.send_signal(signal.SIGTERM)
        await gw.wait_for_event("shutting_down")
        gw.process.send_signal(signal.SIGINT)
        with anyio.fail_after(30):
            assert await gw.process.wait() == 128 + signal.SIGINT
        await all_gone(pids)
        killed = await gw.wait_for_event("killed_what_remained")
        assert killed["signal"] == "SIGINT"
        assert killed["leftovers"] >= 1  # the daemon, out of the group: only its tag finds it


async def test_a_reload_is_announced_at_once_while_an_upstream_it_starts_is_still_starting(tmp_path: Path) -> None:
    """An operator's tester: a reload that changed the policy and added a slow-starting upstream told the
    sessions 16 s later, once that upstream was up (the reload waited for it to settle, and a SIGTERM or
    the next reload waited behind it). The new upstream is announced on its own when it is ready."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    late = {
        "namespace": "late",
        "command": sys.executable,
        "args": ["-m", "tests.servers.gated", str(gate), sys.executable, "-m", "gateway.demo.engineering"],
        "cwd": str(ROOT),
        "timeout_s": 60,
    }
    path = write_config(tmp_path / "c.toml", [demo_upstream("writing", "writing")], server=HTTP)
    changes = ListChangedWatcher()
    async with (
        running_gateway(path) as gw,
        Client(f"{gw.url}/mcp", mode="legacy", cache=None, message_handler=changes) as client,
    ):
        assert "writing__translate" in await names(client)
        write_config(path, [demo_upstream("writing", "writing"), late], server=HTTP, policy={"deny": ["*translate"]})
        gw.process.send_signal(signal.SIGHUP)
        await gw.wait_for_event("config_reloaded")
        await changes.wait(30)  # while "late" cannot even start (the gate is shut): not after its 61 s
        assert "writing__translate" not in await names(client)
        await anyio.to_thread.run_sync(lambda: os.close(os.open(gate, os.O_WRONLY)))  # let it start
        while "late__code_review" not in await names(client):
            await changes.wait(30)


async def test_a_reload_applies_the_gateway_bounds_to_kept_and_new_upstreams(tmp_path: Path) -> None:
    """An operator's tester: upstreams a reload started took the previous [gateway] bounds (restarts
    without end where max_restarts = 2 was set, backoff past restart_max_s) and kept ones never got the
    new ones. max_message_bytes, the front end's bound too, is said to wait for a restart."""
    path = write_config(tmp_path / "c.toml", [slow_upstream()], server=HTTP, gateway={"max_requests_per_upstream": 1})
    crashing = {"namespace": "crashy", "command": sys.executable, "args": ["-c", "raise SystemExit(1)"]}

    async def two_at_once(client: Client) -> list[str]:
        outcomes: list[str] = []

        async def get() -> None:
            try:
                await client.get_prompt("bad__slow", {"seconds": "1"})
                outcomes.append("answered")
            except Exception as exc:  # (the refusal is what is looked at)
                outcomes.append(str(exc))

        async with anyio.create_task_group() as tg:
            tg.start_soon(get)
            tg.start_soon(get)
        return sorted(outcomes)

    async with running_gateway(path) as gw, Client(f"{gw.url}/mcp", mode="legacy", cache=None) as client:
        answered, refused = sorted(await two_at_once(client), key=lambda outcome: outcome != "answered")
        assert answered == "answered"
        assert "saturated (1 requests in flight)" in refused
        bounds = {"max_requests_per_upstream": 2, "max_restarts": 1, "restart_initial_s": 0.05}
        at_restart = {"max_message_bytes": 99999, "max_requests_per_session": 7, "shutdown_grace_s": 3}
        write_config(path, [slow_upstream(), crashing], server=HTTP, gateway={**bounds, **at_restart})
        gw.process.send_signal(signal.SIGHUP)
        ignored = {(await gw.wait_for_event("reload_setting_ignored"))["setting"] for _ in at_restart}
        assert ignored == {f"gateway.{key}" for key in at_restart}  # (a reviewer: two were kept silently)
        await gw.wait_for_event("config_reloaded")
        assert await two_at_once(client) == ["answered", "answered"]  # the kept upstream's new bound
        await gw.wait_for_event("upstream_state", upstream="crashy", state="failed")  # the new one's


async def test_a_request_the_stops_grace_does_not_see_answered_is_told_so_in_json(tmp_path: Path) -> None:
    """An operator's tester: a request still running when shutdown_grace_s ran out got uvicorn's plain-text
    ``500 Internal Server Error``, and the log got lines that are no JSON (``Cancel 1 running task(s)``,
    ``Exception in ASGI application`` and a traceback)."""
    path = write_config(tmp_path / "c.toml", [slow_upstream()], server=HTTP, gateway={"shutdown_grace_s": 1})
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}

    def get(name: str, request_id: int, **arguments: str) -> tuple[dict[str, Any], dict[str, str]]:
        params = {"name": name, "arguments": arguments, "_meta": envelope}
        message = {"jsonrpc": "2.0", "id": request_id, "method": "prompts/get", "params": params}
        return message, {**headers, "Mcp-Method": "prompts/get", "Mcp-Name": name}

    async with running_gateway(path) as gw, httpx.AsyncClient(timeout=60) as http:
        answers: list[httpx.Response] = []

        async def slow() -> None:
            message, sent = get("bad__slow", 7, seconds="120")
            answers.append(await http.post(f"{gw.url}/mcp", json=message, headers=sent))

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            while True:  # until the upstream holds it (asked of the upstream itself: no waiting on time)
                message, sent = get("bad__cancel_status", 8)
                status = (await http.post(f"{gw.url}/mcp", json=message, headers=sent)).json()
                if json.loads(status["result"]["messages"][0]["content"]["text"])["slow"]:
                    break
            gw.process.send_signal(signal.SIGTERM)
        [answer] = answers
        assert answer.status_code == 503
        assert answer.headers["content-type"] == "application/json"
        assert "stopped before this request was answered" in answer.json()["error"]["message"]
        assert answer.json()["id"] == 7  # under its own id
        with anyio.fail_after(30):
            await gw.process.wait()
    assert gw.not_json == []
