"""An upstream that dies is announced with list_changed when its connection ends, not once its process
group has been stopped: that stop may take seconds (what outlives the server in its group, a wrapper,
a browser or a language server it started, gets end of input, then SIGTERM, then SIGKILL, each with its
wait), and a client used to see the prompts gone from the listing seconds before it was told."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import mcp.types as t
import pytest
from mcp import Client

from tests.integration.helpers import ROOT, Gate, ListChangedWatcher, RunningGateway, running_gateway, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def kill_the_server(client: Client, gateway: RunningGateway) -> None:
    """SIGKILL to the process serving ``dyn`` (the pid its ``pid`` prompt gives), the events so far cleared."""
    content = (await client.get_prompt("dyn__pid")).messages[0].content
    assert isinstance(content, t.TextContent)
    gateway.events.clear()
    os.kill(int(content.text), signal.SIGKILL)


LINGERING_LEADER = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-m", "tests.servers.dynamic"])
os.close(0)
os.close(1)
os.closerange(3, 1024)  # copies of its stdin/stdout a process may be given beside fds 0 and 1 (uvloop's)
time.sleep(600)
"""
"""A wrapper that starts the server on its own stdin/stdout, lets go of them, and lingers: it exits
neither when the server dies nor at the end of its input nor at SIGTERM."""


async def test_list_changed_comes_when_the_connection_ends_not_when_the_process_group_is_gone(
    tmp_path: Path,
) -> None:
    gate = Gate(tmp_path)  # the restart waits here: the upstream cannot come back during the test
    upstream = gate.upstream("dyn", [sys.executable, "-c", LINGERING_LEADER], cwd=str(ROOT), timeout_s=20)
    config = write_config(tmp_path / "c.toml", [upstream], server={"transport": "http", "port": 0})
    changes = ListChangedWatcher()
    async with running_gateway(config) as gateway:
        await gate.open()
        await gateway.wait_for_event("upstream_state", upstream="dyn", state="ready")
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None, message_handler=changes) as client:
            await kill_the_server(client, gateway)
            await changes.wait()
            assert "dyn__pid" not in {p.name for p in (await client.list_prompts()).prompts}
            await gateway.wait_for_event("list_changed_broadcast")
            # what the gateway logged before that broadcast has been collected: its stop was not over
            stopped = [e for e in gateway.events if e.get("event") == "upstream_state" and e.get("upstream") == "dyn"]
            assert stopped == []
            backing_off = await gateway.wait_for_event("upstream_state", upstream="dyn", state="backing-off")
            assert backing_off["error"] == "connection closed"  # the wrapper, alive, was stopped: not its exit


DAEMON_KEEPING_A_COPY = """
import os, subprocess, sys
copy = os.dup(1)  # uvx, npm and shells keep copies of their stdio at higher descriptors
daemon = "import time; time.sleep(600)"
subprocess.Popen([sys.executable, "-c", daemon], start_new_session=True, pass_fds=(copy,), stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
os.execv(sys.executable, [sys.executable, "-m", "tests.servers.dynamic"])
"""
"""A server that starts a daemon of its own session, which inherits a copy of the server's stdout."""


async def test_a_server_whose_daemon_holds_its_output_is_seen_to_die_and_comes_back(tmp_path: Path) -> None:
    """A tester: such a server, killed, stayed "ready" for good (its stdout never ended: the daemon held
    it), and every listing waited timeout_s for it. Its exit now ends the connection, the daemon goes
    with it, and the server is started again."""
    command = {"command": sys.executable, "args": ["-c", DAEMON_KEEPING_A_COPY], "cwd": str(ROOT)}
    config = write_config(
        tmp_path / "c.toml", [{"namespace": "dyn", **command}], server={"transport": "http", "port": 0}
    )
    changes = ListChangedWatcher()
    async with running_gateway(config) as gateway:
        await gateway.wait_for_event("upstream_state", upstream="dyn", state="ready")
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None, message_handler=changes) as client:
            await kill_the_server(client, gateway)
            await gateway.wait_for_event("upstream_output_held")  # asked whether it serves on: it does not
            backing_off = await gateway.wait_for_event("upstream_state", upstream="dyn", state="backing-off")
            # and how it ended is said, as for an exit while starting (it said only "connection closed")
            assert backing_off["error"].startswith("connection closed: the server was killed by SIGKILL; its stderr")
            ended = await gateway.wait_for_event("upstream_leftovers_ended")
            assert ended["count"] == 1  # the daemon, by the tag it carries
            await gateway.wait_for_event("upstream_state", upstream="dyn", state="ready")
            while "dyn__pid" not in {p.name for p in (await client.list_prompts()).prompts}:
                await changes.wait()


DAEMONIZING = """
import os, sys
left, told = os.pipe()
if os.fork():
    os.close(told)
    os.read(left, 1)  # the server has left the group (the gateway ends the group its first process leaves)
    os._exit(0)  # the first process goes; the server serves on in a session of its own, on the same stdio
os.setsid()
os.close(left)
os.write(told, b"x")
os.close(told)
os.execv(sys.executable, [sys.executable, "-m", "tests.servers.dynamic"])
"""


async def test_a_server_that_daemonizes_serves_on(tmp_path: Path) -> None:
    """A reviewer: a server that forks, leaves its session and lets its first process exit, serving on
    the stdio it inherited, was cut a second after that exit and restarted, again and again."""
    command = {"command": sys.executable, "args": ["-c", DAEMONIZING], "cwd": str(ROOT)}
    config = write_config(
        tmp_path / "c.toml", [{"namespace": "dyn", **command}], server={"transport": "http", "port": 0}
    )
    async with running_gateway(config) as gateway:
        await gateway.wait_for_event("upstream_state", upstream="dyn", state="ready")
        await gateway.wait_for_event("upstream_serves_on", upstream="dyn")  # it answered when asked
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
            content = (await client.get_prompt("dyn__pid")).messages[0].content
            assert isinstance(content, t.TextContent)
        lost = [e for e in gateway.events if e.get("event") == "upstream_state" and e.get("state") == "backing-off"]
        assert lost == []
