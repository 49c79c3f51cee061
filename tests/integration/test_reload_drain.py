"""A reload that restarts or removes an upstream lets the requests it has in flight finish on their
connection, within the stop's grace, while new requests go to the new connection (found in the
session notes: such a request failed at once with "went away before answering")."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from tests.integration.helpers import process_gone, running_gateway, sdk_upstream, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
HTTP = {"transport": "http", "port": 0}


def held_upstream(generation: str, namespace: str = "hold") -> dict[str, Any]:
    return sdk_upstream(namespace, "held", env={"GENERATION": generation})


class HeldRequest:
    """A get of ``hold__held`` the test holds in the upstream: ``reached`` returns once the server has
    it, ``release`` lets the server answer; ``outcome`` is its answer's text or the error's message."""

    def __init__(self, tmp_path: Path) -> None:
        self.entered, self.released = str(tmp_path / "entered"), str(tmp_path / "release")
        os.mkfifo(self.entered)
        os.mkfifo(self.released)
        self.outcome = ""
        self.done = anyio.Event()

    async def run(self, client: Client, name: str = "hold__held") -> None:
        try:
            got = await client.get_prompt(name, {"entered": self.entered, "release": self.released})
            content = got.messages[0].content
            self.outcome = getattr(content, "text", "")
        except MCPError as exc:
            self.outcome = exc.error.message
        finally:
            self.done.set()

    async def reached(self) -> None:
        await anyio.to_thread.run_sync(lambda: os.close(os.open(self.entered, os.O_RDONLY)))

    async def release(self) -> None:
        await anyio.to_thread.run_sync(lambda: os.close(os.open(self.released, os.O_WRONLY)))


async def pid_of(client: Client, name: str = "hold__pid") -> int:
    content = (await client.get_prompt(name)).messages[0].content
    return int(getattr(content, "text", ""))


async def test_a_reload_lets_requests_in_flight_to_an_upstream_it_restarts_finish(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c.toml", [held_upstream("1")], server=HTTP)
    held = HeldRequest(tmp_path)
    async with running_gateway(path) as gw, Client(f"{gw.url}/mcp", mode="legacy", cache=None) as client:
        await gw.wait_for_event("upstream_state", upstream="hold", state="ready")
        old_pid = await pid_of(client)
        async with anyio.create_task_group() as tg:
            tg.start_soon(held.run, client)
            await held.reached()
            write_config(path, [held_upstream("2")], server=HTTP)  # its environment changed: restarted
            gw.process.send_signal(signal.SIGHUP)
            reloaded = await gw.wait_for_event("config_reloaded")
            assert (reloaded["stopped"], reloaded["started"]) == (["hold"], ["hold"])
            draining = await gw.wait_for_event("upstream_draining", upstream="hold")
            assert draining["in_flight"] == 1
            await gw.wait_for_event("upstream_state", upstream="hold", state="ready")  # the new connection
            new_pid = await pid_of(client)  # new requests go to the new server meanwhile
            assert new_pid != old_pid
            assert not held.done.is_set()
            await held.release()
        assert held.outcome == f"held by {old_pid}"  # answered by the server it was sent to
        drained = await gw.wait_for_event("upstream_drained", upstream="hold")
        assert (drained["finished"], drained["cut"]) == (True, 0)
        await gw.wait_for_event("upstream_state", upstream="hold", state="stopped")  # the old one, once drained
        assert process_gone(old_pid)
        assert await pid_of(client) == new_pid


async def test_a_reload_that_removes_an_upstream_lets_its_request_finish(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c.toml", [held_upstream("1"), held_upstream("1", "other")], server=HTTP)
    held = HeldRequest(tmp_path)
    async with running_gateway(path) as gw, Client(f"{gw.url}/mcp", mode="legacy", cache=None) as client:
        await gw.wait_for_event("upstream_state", upstream="hold", state="ready")
        old_pid = await pid_of(client)
        async with anyio.create_task_group() as tg:
            tg.start_soon(held.run, client)
            await held.reached()
            write_config(path, [held_upstream("1", "other")], server=HTTP)
            gw.process.send_signal(signal.SIGHUP)
            reloaded = await gw.wait_for_event("config_reloaded")
            assert (reloaded["stopped"], reloaded["kept"]) == (["hold"], ["other"])
            await gw.wait_for_event("upstream_draining", upstream="hold")
            with pytest.raises(MCPError, match="hold__pid"):  # gone from the catalog at once
                await pid_of(client)
            await held.release()
        assert held.outcome == f"held by {old_pid}"
        assert (await gw.wait_for_event("upstream_drained", upstream="hold"))["finished"] is True


async def test_a_request_still_in_flight_when_the_grace_ends_is_cut(tmp_path: Path) -> None:
    path = write_config(tmp_path / "c.toml", [held_upstream("1")], server=HTTP, gateway={"shutdown_grace_s": 0.2})
    held = HeldRequest(tmp_path)
    async with running_gateway(path) as gw, Client(f"{gw.url}/mcp", mode="legacy", cache=None) as client:
        await gw.wait_for_event("upstream_state", upstream="hold", state="ready")
        async with anyio.create_task_group() as tg:
            tg.start_soon(held.run, client)
            await held.reached()
            write_config(path, [held_upstream("2")], server=HTTP)
            gw.process.send_signal(signal.SIGHUP)
            drained = await gw.wait_for_event("upstream_drained", upstream="hold")
            assert (drained["finished"], drained["cut"]) == (False, 1)
            with anyio.fail_after(30):
                await held.done.wait()
        assert "went away" in held.outcome or "stopped" in held.outcome, held.outcome
