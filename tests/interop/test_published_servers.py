"""Published prompt servers as users install and configure them, pinned in ``interop/`` (npm and two
venvs, one per Python SDK generation): one of each SDK generation, and the ones that misbehaved politely
(issue 36). Each answers alike directly and through the gateway: its listing, a get, its errors, and
completion (where offered), with the official SDK's client on both sides.

- ``mcp-server-fetch`` (Python SDK 2.x low-level ``Server``, 2026-07-28);
- ``fastmcp-sample-server`` (FastMCP 4, 2026-07-28; its default transport is SSE, stdio on request);
- ``mcp-server-sqlite`` (Python SDK 1.x; runs on after its standard input ends) and ``arxiv-mcp-server``
  (Python SDK 1.x; answers its errors with JSON-RPC code 0);
- ``@takescake/1password-mcp`` (TypeScript SDK 2.x ``serveStdio``, 2026-07-28: it pins a connection's era
  on the first request after ``server/discover``);
- ``@modelcontextprotocol/server-everything`` (TypeScript SDK 1.x, handshake era; offers completions);
- ``@cyanheads/git-mcp-server`` over Streamable HTTP (TypeScript SDK 1.x: answers the era probe with
  HTTP 500 and JSON-RPC -32603).
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, MCPError, StdioServerParameters

from tests.integration.helpers import ListChangedWatcher, gateway_params, process_gone, running_gateway, write_config
from tests.integration.services import free_port
from tests.interop.conftest import npm_package

pytestmark = pytest.mark.anyio
HTTP = {"transport": "http", "port": 0}


@dataclass(frozen=True)
class Published:
    """One published server as its README has users run it, and a get that renders without the network."""

    namespace: str
    command: list[str]
    prompt: str
    arguments: dict[str, str]
    required: str | None  # an argument of ``prompt`` the server requires (left out for the error case)
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None  # where it may write what it keeps beside it (fastmcp-sample-server's data/)

    def upstream(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"namespace": self.namespace, "command": self.command[0], "args": self.command[1:]}
        return {**entry, **({"env": self.env} if self.env else {}), **({"cwd": str(self.cwd)} if self.cwd else {})}

    def direct(self) -> StdioServerParameters:
        return StdioServerParameters(command=self.command[0], args=self.command[1:], env=self.env or None, cwd=self.cwd)


def stdio_servers(node: str, published: Path, published_mcp1: Path, tmp_path: Path) -> list[Published]:
    onepassword = npm_package("@takescake/1password-mcp") / "bin" / "1password-mcp.js"
    everything = npm_package("@modelcontextprotocol/server-everything") / "dist" / "index.js"
    return [
        # loopback is refused unless started with --allow-private-ips: a rendering without the network
        Published("fetch", [str(published / "mcp-server-fetch")], "fetch", {"url": "http://127.0.0.1:9/"}, "url"),
        Published(
            "sample",
            [str(published / "sample-mcp-server"), "--transport", "stdio"],
            "code_review",
            {"code": "x = 1"},
            "code",
            cwd=tmp_path,
        ),
        Published(
            "sqlite",
            [str(published_mcp1 / "mcp-server-sqlite"), "--db-path", str(tmp_path / "test.db")],
            "mcp-demo",
            {"topic": "orbits"},
            "topic",
        ),
        Published(
            "arxiv",
            [str(published_mcp1 / "arxiv-mcp-server"), "--storage-path", str(tmp_path / "papers")],
            "research-discovery",
            {"topic": "orbits", "expertise_level": "expert"},
            "topic",
        ),
        Published("onepassword", [node, str(onepassword)], "secret-reference-helper", {"vaultName": "Ops"}, None),
        Published(
            "everything",
            [node, str(everything), "stdio"],
            "completable-prompt",
            {"department": "Engineering", "name": "Alice"},
            "department",
        ),
    ]


@asynccontextmanager
async def git_mcp_server(node: str) -> AsyncIterator[str]:
    """@cyanheads/git-mcp-server over Streamable HTTP, as its README starts it; yields its URL."""
    script = npm_package("@cyanheads/git-mcp-server") / "dist" / "index.js"
    env = {**os.environ, "MCP_TRANSPORT_TYPE": "http", "MCP_HTTP_HOST": "127.0.0.1", "MCP_HTTP_PORT": str(free_port())}
    async with await anyio.open_process([node, str(script)], env=env) as process:
        assert process.stderr is not None
        log = BufferedByteReceiveStream(process.stderr)
        with anyio.fail_after(30):
            while (
                found := re.search(rb"listening at (http://\S+/mcp)", await log.receive_until(b"\n", 1 << 16))
            ) is None:
                pass  # it takes the next port when the one given is taken, and says which
        async with anyio.create_task_group() as tg:
            tg.start_soon(log.receive_until, b"\0", 1 << 30)  # drained, or a full pipe would stall it
            try:
                yield found.group(1).decode()
            finally:
                process.terminate()
                tg.cancel_scope.cancel()


async def error_of(client: Client, name: str, arguments: dict[str, str]) -> tuple[int, str]:
    with pytest.raises(MCPError) as raised:
        await client.get_prompt(name, arguments)
    return raised.value.error.code, raised.value.error.message


def described(prompt: Any) -> dict[str, Any]:
    """A listing entry as a client reads it, its name and the server's stamp aside."""
    return prompt.model_dump(exclude={"name", "meta"}, exclude_none=True)


async def compare(server: Published, gateway: Client, direct: Client) -> None:
    public = f"{server.namespace}__{server.prompt}"
    listed = {p.name: p for p in (await direct.list_prompts()).prompts}
    through = {
        p.name.removeprefix(f"{server.namespace}__"): p
        for p in (await gateway.list_prompts()).prompts
        if p.name.startswith(f"{server.namespace}__")
    }
    assert {k: described(v) for k, v in through.items()} == {k: described(v) for k, v in listed.items()}

    rendered, relayed = (
        await direct.get_prompt(server.prompt, server.arguments),
        await gateway.get_prompt(public, server.arguments),
    )
    assert (relayed.description, relayed.messages) == (rendered.description, rendered.messages)

    await error_of(direct, "no-such-prompt", {})
    assert await error_of(gateway, f"{server.namespace}__no-such-prompt", {}) == (
        -32602,
        f"Unknown prompt: {server.namespace}__no-such-prompt",
    )
    if server.required is not None:
        await error_of(direct, server.prompt, {})
        code, message = await error_of(gateway, public, {})
        assert code == -32602
        assert server.required in message
        assert public in message

    argument = {"name": server.required or next(iter(server.arguments)), "value": ""}
    completed = await gateway.complete({"type": "ref/prompt", "name": public}, argument)
    if direct.server_capabilities.completions is not None:
        offered = await direct.complete({"type": "ref/prompt", "name": server.prompt}, argument)
        assert completed.completion.values == offered.completion.values != []
    else:  # none offered: the gateway, which declares completions for the others, has none for it
        with pytest.raises(MCPError, match="Method not found"):
            await direct.complete({"type": "ref/prompt", "name": server.prompt}, argument)
        assert completed.completion.values == []


async def test_published_servers_answer_alike_directly_and_through_the_gateway(
    tmp_path: Path, node: str, published_bin: Path, published_mcp1_bin: Path
) -> None:
    servers = stdio_servers(node, published_bin, published_mcp1_bin, tmp_path)
    async with git_mcp_server(node) as git_url:
        upstreams = [s.upstream() for s in servers]
        upstreams.append({"namespace": "git", "transport": "streamable-http", "url": git_url})  # protocol = auto
        config = write_config(tmp_path / "c.toml", upstreams, server=HTTP)
        async with running_gateway(config) as gw, Client(f"{gw.url}/mcp", cache=None) as gateway:
            for namespace in [s.namespace for s in servers] + ["git"]:
                ready = await gw.wait_for_event("upstream_state", 60, upstream=namespace, state="ready")
                assert ready["protocol_version"] in ("2026-07-28", "2025-11-25")
            listen = await gw.wait_for_event(("upstream_listening", "upstream_listen_refused"), upstream="onepassword")
            # a bare ping behind the era probe pinned this TypeScript SDK 2.x server to the handshake era
            assert listen["event"] == "upstream_listening"
            assert listen["prompts_list_changed"] is True

            for server in servers:
                async with Client(server.direct(), cache=None) as direct:
                    await compare(server, gateway, direct)
            git = Published("git", [], "git_wrapup", {"createTag": "false"}, None)
            async with Client(git_url, cache=None) as direct:
                await compare(git, gateway, direct)


async def test_the_sdk_stdio_client_leaving_stops_every_published_server(
    tmp_path: Path, node: str, published_bin: Path, published_mcp1_bin: Path
) -> None:
    """The SDK's stdio client starts the gateway and leaves (end of input, then SIGTERM, then SIGKILL of
    the gateway's group): every server process, mcp-server-sqlite (which runs on after end of input)
    and Node's included, ends with it."""
    servers = stdio_servers(node, published_bin, published_mcp1_bin, tmp_path)
    config = write_config(tmp_path / "c.toml", [s.upstream() for s in servers])
    wanted = {f"{s.namespace}__{s.prompt}" for s in servers}
    changes = ListChangedWatcher()
    async with Client(gateway_params(config), mode="legacy", cache=None, message_handler=changes) as client:
        with anyio.fail_after(60):
            while not wanted <= {p.name for p in (await client.list_prompts()).prompts}:
                await changes.wait(timeout=60)  # a server still coming up is announced when it does
        started = psutil.Process().children(recursive=True)  # the gateway and everything it started
        assert len(started) > len(servers)
    with anyio.fail_after(30):
        while not all(process_gone(p.pid) for p in started):
            await anyio.sleep(0.05)  # processes outside the gateway's children give no event to await
