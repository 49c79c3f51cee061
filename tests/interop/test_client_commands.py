"""Every client command the README gives, run as written against the client's current release (pinned in
``interop/package.json``): the MCP Inspector (its browser mode and its CLI) and the Claude Code CLI
(``claude mcp add`` then ``claude mcp list``, which connects to each server, over stdio and HTTP; no
account needed). The README's ``/path/to/...`` are this checkout's gateway and example config; the
Inspector's command names its version, the one ``interop/package.json`` pins.

The Inspector 2.12 has a ``--config`` of its own: the README's former command, the gateway's after the
Inspector's name without ``--``, was refused by it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import sys
from contextlib import suppress
from pathlib import Path

import anyio
import pytest

from tests.integration.helpers import demo_upstream, running_gateway, write_config
from tests.integration.services import free_port
from tests.integration.test_lifecycle import all_gone, recorded_pids, stubborn
from tests.interop.conftest import ROOT

pytestmark = pytest.mark.anyio
README = (ROOT / "README.md").read_text()
PACKAGES = ROOT / "interop" / "node_modules"
GATEWAY = str(Path(sys.executable).parent / "prompt-gateway")
EXAMPLE = str(ROOT / "config.example.toml")
INSPECTOR = "@modelcontextprotocol/inspector"
TOKEN = "readme-token-" + "x" * 32  # what the README's $PROMPTS_TOKEN stands for here


def with_token(command: str, url: str) -> list[str]:
    """A README command over HTTP as a shell would split it, the gateway's URL and token in it."""
    return shlex.split(command.replace("http://127.0.0.1:8080", url).replace("$PROMPTS_TOKEN", TOKEN))


def token_config(path: Path) -> Path:
    return write_config(
        path,
        [demo_upstream("writing", "writing")],
        server={"transport": "http", "port": 0},
        tokens=[{"name": "readme", "token": TOKEN}],
    )


def readme_commands(start: str) -> list[str]:
    """The README's inline commands that begin with ``start`` (spread over lines, as Markdown wraps them)."""
    text = " ".join(README.split())
    found = [m.group(1) for m in re.finditer(r"`(" + re.escape(start) + r"[^`]*)`", text)]
    assert found, f"the README has no `{start} ...` command"
    return [c.replace("/path/to/prompt-gateway", GATEWAY).replace("/path/to/gateway.toml", EXAMPLE) for c in found]


def environment(node: str, home: Path) -> dict[str, str]:
    """Node 22+ first on PATH (the Inspector and Claude Code need it), and a home of the test's own."""
    path = os.pathsep.join([str(Path(node).parent), str(PACKAGES / ".bin"), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "HOME": str(home), "MCP_AUTO_OPEN_ENABLED": "false"}


def npx() -> str:
    """The system's npx, run by the Node first on PATH (the wheel's own npm is broken: PEERS.md)."""
    found = shutil.which("npx", path="/usr/local/bin:/usr/bin:/bin")
    if found is None:
        pytest.skip("npx is not installed")
    return found


def inspector_pinned() -> tuple[str, str]:
    """The Inspector version ``interop/package.json`` pins, and the Node its ``engines`` asks for."""
    pinned = json.loads((ROOT / "interop" / "package.json").read_text())["devDependencies"][INSPECTOR]
    installed = json.loads((PACKAGES / INSPECTOR / "package.json").read_text())
    assert installed["version"] == pinned, "interop/node_modules is not what interop/package.json pins: npm ci"
    return pinned, installed["engines"]["node"]


async def test_the_inspector_commands_of_the_readme(node: str, tmp_path: Path) -> None:
    """Run as written (``npx -y NAME@VERSION ...``) by Node 24, where npm may fetch nothing (offline, an
    empty cache of its own): the pinned version is found in ``interop/node_modules`` or the command fails.
    Unpinned, npx on Node 20 ran Inspector 0.15, where this command line means something else."""
    version, engines = inspector_pinned()
    browser, cli, over_http = readme_commands(f"npx -y {INSPECTOR}@{version} ")
    needs = re.fullmatch(r">=\s*(\d+)\.(\d+)\.0", engines)
    assert needs is not None, engines
    assert f"Node ≥ {needs[1]}.{needs[2]}" in " ".join(README.split())  # the README says what it runs on
    running = (await anyio.run_process([node, "--version"])).stdout.decode().strip()  # the wheel's: Node 24
    assert tuple(map(int, running.lstrip("v").split(".")[:2])) >= (int(needs[1]), int(needs[2])), running
    env = {**environment(node, tmp_path), "npm_config_offline": "true", "npm_config_cache": str(tmp_path / "npm")}
    listed = await anyio.run_process([npx(), *cli.split()[1:]], env=env, cwd=ROOT / "interop", check=False)
    assert listed.returncode == 0, listed.stderr.decode()[-2000:]
    assert b"writing__summarize" in listed.stdout
    async with running_gateway(token_config(tmp_path / "http.toml")) as gateway:  # with a token, over HTTP
        command = with_token(over_http, gateway.url)
        listed = await anyio.run_process([npx(), *command[1:]], env=env, cwd=ROOT / "interop", check=False)
    assert listed.returncode == 0, listed.stderr.decode()[-2000:]
    assert b"writing__summarize" in listed.stdout
    ports = {"CLIENT_PORT": str(free_port()), "SERVER_PORT": str(free_port())}  # not the fixed 6274/6277
    async with await anyio.open_process(
        [npx(), *browser.split()[1:]],
        env={**env, **ports},
        cwd=ROOT / "interop",
        start_new_session=True,  # npx runs the Inspector as a child: the whole group is ended below
    ) as inspector:
        assert inspector.stdout is not None
        said = b""
        try:
            with anyio.fail_after(60):  # up and serving its page: the command line was accepted
                while f":{ports['CLIENT_PORT']}".encode() not in said:
                    said += await inspector.stdout.receive()
        finally:
            with suppress(ProcessLookupError):
                os.killpg(inspector.pid, signal.SIGTERM)
        assert b"cannot be combined" not in said


async def test_the_claude_code_commands_of_the_readme(node: str, tmp_path: Path) -> None:
    claude = PACKAGES / ".bin" / "claude"
    if not claude.exists():
        pytest.fail("the Claude Code CLI is not installed: npm ci --prefix interop")
    env = environment(node, tmp_path / "home")
    project = tmp_path / "project"
    project.mkdir()
    (stdio,) = readme_commands("claude mcp add prompts")
    added = await anyio.run_process([str(claude), *stdio.split()[1:]], env=env, cwd=project, check=False)
    assert added.returncode == 0, added.stderr.decode()
    async with running_gateway(token_config(tmp_path / "http.toml")) as gateway:  # the header's token needed
        (http,) = readme_commands("claude mcp add --transport http prompts")
        command = with_token(http.replace("prompts", "prompts-http", 1), gateway.url)
        added = await anyio.run_process([str(claude), *command[1:]], env=env, cwd=project, check=False)
        assert added.returncode == 0, added.stderr.decode()
        bare = [str(claude), "mcp", "add", "--transport", "http", "no-header", f"{gateway.url}/mcp"]
        assert (await anyio.run_process(bare, env=env, cwd=project, check=False)).returncode == 0
        listed = await anyio.run_process([str(claude), "mcp", "list"], env=env, cwd=project, check=False)
    output = listed.stdout.decode()
    assert listed.returncode == 0, output + listed.stderr.decode()
    connected = [line for line in output.splitlines() if "Connected" in line]
    assert len(connected) == 2, output  # it connected to each: the gateway over stdio and over HTTP
    (refused,) = [line for line in output.splitlines() if line.startswith("no-header:")]
    said = " ".join(README.split()).split("which Claude Code shows as `", 1)[1].split("`", 1)[0]
    assert said in refused, refused  # what the README says a client without the token sees


async def test_claude_code_stopping_the_gateway_leaves_no_upstream_behind(node: str, tmp_path: Path) -> None:
    """Claude Code 2.1 stops a stdio server with SIGINT, then SIGTERM 100 ms later and SIGKILL 400 ms after
    that, to the server's pid alone (read from its build); the upstreams, each in a session of its own,
    are not in it. Upstreams that ignore end of input and SIGTERM (with a child and a daemon each) must
    still all be gone once Claude Code has stopped the gateway (no account needed: nothing is sent)."""
    claude = PACKAGES / ".bin" / "claude"
    if not claude.exists():
        pytest.fail("the Claude Code CLI is not installed: npm ci --prefix interop")
    config = write_config(tmp_path / "c.toml", [stubborn("calm", tmp_path), stubborn("deaf", tmp_path, deaf=True)])
    servers = {"mcpServers": {"prompts": {"command": GATEWAY, "args": ["serve", "--config", str(config)]}}}
    (tmp_path / "mcp.json").write_text(json.dumps(servers))
    env = {**environment(node, tmp_path / "home"), "ANTHROPIC_API_KEY": "sk-ant-not-a-key"}
    debug = tmp_path / "claude-debug.txt"
    command = [str(claude), "--mcp-config", str(tmp_path / "mcp.json"), "--debug-file", str(debug), "-p", "hello"]
    async with await anyio.open_process(command, env=env, cwd=tmp_path) as session:
        with anyio.fail_after(90):  # upstreams outside the gateway's own children give no event to await
            while not (tmp_path / "pids").exists() or len((tmp_path / "pids").read_text().split()) < 6:
                await anyio.sleep(0.1)
        pids = recorded_pids(tmp_path, 6)
        session.send_signal(signal.SIGINT)  # Ctrl-C: Claude Code closes its MCP servers as it ends
        with anyio.fail_after(60):
            await session.wait()
    await all_gone(pids)
    log = debug.read_text()
    assert 'MCP server "prompts": Sending SIGINT to MCP server process' in log  # its own stop sequence ran
    assert "MCP server process exited" in log or "SIGKILL" in log
