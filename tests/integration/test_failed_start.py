"""A gateway that cannot start says why to the MCP client that launched it, not just "Connection closed":
the official SDK client starts ``prompt-gateway serve`` as MCP clients do (a minimal environment), and
the config needs a variable that environment lacks."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import anyio
import pytest
from mcp import Client, MCPError
from mcp.client.stdio import stdio_client

from tests.integration.helpers import (
    ROOT,
    demo_upstream,
    gateway_command,
    gateway_params,
    running_gateway,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REASON = "gateway.cursor_secret: environment variable CURSOR_SECRET_FOR_TEST is not set"


def needing_a_variable(tmp_path: Path, **server: str) -> Path:
    return write_config(
        tmp_path / "gateway.toml",
        [demo_upstream("writing", "writing")],
        gateway={"cursor_secret": "${CURSOR_SECRET_FOR_TEST}"},
        server=server or None,
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # auto probes with server/discover, then initializes
async def test_the_sdk_client_is_told_why_the_gateway_cannot_start(tmp_path: Path, mode: str) -> None:
    params = gateway_params(needing_a_variable(tmp_path))
    with tempfile.TemporaryFile("w+") as errlog:
        with anyio.fail_after(60), pytest.raises(BaseException) as info:
            async with Client(stdio_client(params, errlog=errlog), mode=mode, cache=None):
                pass
        errlog.seek(0)
        stderr = errlog.read()
    error = info.value
    while len(getattr(error, "exceptions", ())) == 1:  # the client's task group wraps it
        error = error.exceptions[0]  # type: ignore[attr-defined]
    assert isinstance(error, MCPError), repr(info.value)
    assert error.error.code == -32603
    assert error.error.message == f"prompt-gateway could not start: {REASON}"
    assert stderr == f"prompt-gateway: {REASON}\n"  # one line


def test_every_request_is_answered_until_stdin_ends_then_it_exits_2(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml", [{"namespace": "x y", "command": "true"}], gateway={"page_size": 0}
    )
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "not json",
        {"jsonrpc": "2.0", "id": "two", "method": "prompts/list"},
    ]
    lines = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in requests)
    result = subprocess.run(
        gateway_command(config, "serve"), input=lines, capture_output=True, text=True, timeout=60, cwd=ROOT, check=False
    )
    assert result.returncode == 2
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, "two"]
    message = answers[0]["error"]["message"]
    assert message == (
        "prompt-gateway could not start: invalid configuration: gateway.page_size: Input should be greater "
        "than or equal to 1 (got 0); upstreams[0].namespace: 'x y' is not a valid namespace: use letters, "
        "digits, '_' and '-' only"
    )
    assert answers[1]["error"]["message"] == message
    assert result.stderr.count("\n") == 1
    assert result.stderr == f"prompt-gateway: {message.removeprefix('prompt-gateway could not start: ')}\n"


def test_a_gateway_meant_for_http_exits_at_once(tmp_path: Path) -> None:
    config = needing_a_variable(tmp_path, transport="http")
    with subprocess.Popen(
        gateway_command(config, "serve"), stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    ) as process:  # stdin stays open: nothing waits on it
        assert process.wait(timeout=60) == 2
        assert process.stderr is not None
        assert process.stderr.read() == f"prompt-gateway: {REASON}\n"


async def test_an_unset_variable_in_one_upstream_fails_that_upstream_alone(tmp_path: Path) -> None:
    """The issue's case: ``${SSL_CERT_FILE}`` in an upstream's env, and a client that does not pass it."""
    needs_it = {**demo_upstream("tls", "writing"), "env": {"SSL_CERT_FILE": "${SSL_CERT_FILE_FOR_TEST}"}}
    config = write_config(tmp_path / "gateway.toml", [demo_upstream("writing", "writing"), needs_it])
    reason = "upstreams[1].env.SSL_CERT_FILE: environment variable SSL_CERT_FILE_FOR_TEST is not set"
    with anyio.fail_after(60):
        async with Client(gateway_params(config), mode="legacy", cache=None) as client:
            listing = await client.list_prompts()
            assert "writing__proofread" in {p.name for p in listing.prompts}
            assert listing.meta == {"prompt-gateway/unavailable": ["tls"]}
            with pytest.raises(MCPError) as info:
                await client.get_prompt("tls__proofread", {"text": "x"})
    assert (info.value.error.code, info.value.error.message) == (-32603, f"Upstream 'tls' is not started: {reason}")
    with anyio.fail_after(60):
        checked = await anyio.run_process(gateway_command(config, "check"), cwd=ROOT, check=False)
    assert checked.returncode == 1
    row = next(line for line in checked.stdout.decode().splitlines() if line.startswith("tls "))
    assert row.split()[2] == "failed"
    assert row.endswith(f"not started: {reason}")


async def test_serve_names_the_command_or_folder_that_is_not_there(tmp_path: Path) -> None:
    """A tester: ``check`` said ``No such file or directory: 'mcp-server-doesnotexist'``, ``serve`` only
    ``No such file or directory`` (it starts servers through uvloop, which names no file)."""
    missing = {"namespace": "missing", "command": "mcp-server-not-installed-here"}
    elsewhere = {**demo_upstream("elsewhere", "writing"), "cwd": str(tmp_path / "no-such-folder")}
    (tmp_path / "a-file").write_text("")
    in_a_file = {**demo_upstream("in-a-file", "writing"), "cwd": str(tmp_path / "a-file")}  # a reviewer's
    upstreams = [missing, elsewhere, in_a_file]
    config = write_config(tmp_path / "c.toml", upstreams, server={"transport": "http", "port": 0})
    async with running_gateway(config) as gateway:
        said = await gateway.wait_for_event("upstream_state", upstream="missing", state="backing-off")
        assert said["error"].endswith("No such file or directory: 'mcp-server-not-installed-here'")
        said = await gateway.wait_for_event("upstream_state", upstream="elsewhere", state="backing-off")
        assert said["error"].endswith(f"No such file or directory: '{tmp_path / 'no-such-folder'}'")
        said = await gateway.wait_for_event("upstream_state", upstream="in-a-file", state="backing-off")
        assert said["error"].endswith(f"Not a directory: '{tmp_path / 'a-file'}'")
