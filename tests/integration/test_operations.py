"""What an operator touches: health, readiness, metrics, logs without secrets, and `import`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from mcp import Client

from gateway.config import load_config
from tests.integration.helpers import ROOT, demo_upstream, running_gateway, write_config

pytestmark = pytest.mark.slow
HTTP = {"transport": "http", "port": 0}
SECRETS = ("token-value-never-logged-0001", "header-value-never-logged", "env-value-never-logged")


@pytest.mark.anyio
async def test_health_readiness_and_metrics(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml",
        [demo_upstream("writing", "writing"), {"namespace": "broken", "command": str(tmp_path / "missing")}],
        server=HTTP,
    )
    async with running_gateway(config) as gw, httpx.AsyncClient() as http:
        assert (await http.get(f"{gw.url}/healthz")).json() == {"status": "ok"}  # at once, whatever upstreams do
        states: dict[str, str] = {}
        while states != {"writing": "ready", "broken": "backing-off"}:
            event = await gw.wait_for_event("upstream_state")
            states[event["upstream"]] = event["state"]
        ready = await http.get(f"{gw.url}/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"ready": True, "upstreams": {"writing": "ready", "broken": "backing-off"}}
        async with Client(f"{gw.url}/mcp", mode="legacy", cache=None) as client:
            await client.list_prompts()
            await client.list_prompts()
            with pytest.raises(Exception, match="Unknown prompt"):
                await client.get_prompt("writing__nope")
            text = (await http.get(f"{gw.url}/metrics")).text
        assert 'prompt_gateway_requests_total{method="prompts/list",outcome="ok"} 2.0' in text
        assert 'prompt_gateway_requests_total{method="prompts/get",outcome="-32602"} 1.0' in text
        assert 'prompt_gateway_request_seconds_count{method="prompts/list"} 2.0' in text
        assert 'prompt_gateway_upstream_up{upstream="writing"} 1.0' in text
        assert 'prompt_gateway_upstream_up{upstream="broken"} 0.0' in text
        assert 'prompt_gateway_upstream_state{state="backing-off",upstream="broken"} 1.0' in text
        assert "prompt_gateway_sessions 1.0" in text
        assert "prompt_gateway_upstream_restarts_total" in text


@pytest.mark.anyio
async def test_readiness_fails_when_no_upstream_is_ready(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml", [{"namespace": "broken", "command": str(tmp_path / "missing")}], server=HTTP
    )
    async with running_gateway(config) as gw, httpx.AsyncClient() as http:
        ready = await http.get(f"{gw.url}/readyz")
        assert ready.status_code == 503
        assert ready.json()["ready"] is False


@pytest.mark.anyio
async def test_secrets_never_reach_the_logs(tmp_path: Path) -> None:
    token, header, env = SECRETS
    config = write_config(
        tmp_path / "c.toml",
        [
            demo_upstream("writing", "writing", env={"API_KEY": env}),
            {
                "namespace": "remote",
                "transport": "streamable-http",
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": f"Bearer {header}"},
                "timeout_s": 1,
            },
        ],
        server=HTTP,
        tokens=[{"name": "ops", "token": token}],
    )
    async with running_gateway(config, "--log-level", "debug") as gw, httpx.AsyncClient() as http:
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}},
        }
        await http.post(f"{gw.url}/mcp", json=init, headers=headers)
        await http.post(f"{gw.url}/mcp", json=init, headers={**headers, "Authorization": "Bearer wrong-token-xxxxxxxx"})
        await gw.wait_for_event("session_started")
    logged = json.dumps(gw.events)
    assert gw.events
    for secret in SECRETS:
        assert secret not in logged


def test_redaction_processor() -> None:
    from gateway.observability.logs import REDACTED, redact_secrets

    event = redact_secrets(
        None,
        "info",
        {
            "event": "x",
            "token": "t",
            "headers": {"Authorization": "a"},
            "nested": {"password": "p", "ok": 1},
            "env": {"K": "v"},
        },
    )
    assert event == {
        "event": "x",
        "token": REDACTED,
        "headers": {"Authorization": REDACTED},
        "nested": {"password": REDACTED, "ok": 1},
        "env": {"K": REDACTED},
    }


def run_import(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "import", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )


def test_import_claude_desktop_and_vscode_configs(tmp_path: Path) -> None:
    claude = tmp_path / "claude_desktop_config.json"
    claude.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]},
                    "my docs!": {"command": "python3", "args": ["-m", "docs"], "env": {"KEY": "pa$$word"}},
                    "files_2": {"command": "other"},
                    "skip me": {"command": "x", "disabled": True},
                }
            }
        )
    )
    result = run_import("--from", "claude-desktop", str(claude))
    assert result.returncode == 0, result.stderr
    out = tmp_path / "gateway.toml"
    out.write_text(result.stdout)
    config = load_config(out, environ={})
    assert [u.namespace for u in config.upstreams] == ["files", "my-docs", "files_2"]
    assert config.upstreams[1].env == {"KEY": "pa$$word"}  # a literal $ stays literal

    vscode = tmp_path / "mcp.json"
    vscode.write_text(
        json.dumps(
            {
                "servers": {
                    "remote": {
                        "type": "http",
                        "url": "https://example.com/mcp",
                        "headers": {"Authorization": "Bearer ${env:TOK}"},
                    },
                    "legacy": {"type": "sse", "url": "https://example.com/sse"},
                }
            }
        )
    )
    written = tmp_path / "from-vscode.toml"
    assert run_import("--from", "vscode", str(vscode), "--output", str(written)).returncode == 0
    config = load_config(written, environ={"TOK": "abc"})
    assert [(u.namespace, u.transport) for u in config.upstreams] == [("remote", "streamable-http"), ("legacy", "sse")]
    assert config.upstreams[0].headers == {"Authorization": "Bearer abc"}  # type: ignore[union-attr]
    assert run_import("--from", "vscode", str(vscode), "--output", str(written)).returncode == 2  # never overwrites


def test_import_rejects_what_it_cannot_read(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert "not valid JSON" in run_import(str(bad)).stderr
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    result = run_import(str(empty))
    assert result.returncode == 2
    assert 'no "mcpServers"' in result.stderr


def test_an_imported_vscode_server_starts_with_its_env_file(tmp_path: Path) -> None:
    """VS Code's envFile was dropped on import; the server then missed the variables it needs."""
    workspace = tmp_path / "site"
    (workspace / ".vscode").mkdir(parents=True)
    (workspace / ".env").write_text(f"# the server's variables\nSPAWNER_PIDS={tmp_path / 'pids'}\n")
    mcp_json = workspace / ".vscode" / "mcp.json"
    mcp_json.write_text(
        """{
  // needs SPAWNER_PIDS, which only its envFile sets
  "servers": {
    "spawns": {
      "type": "stdio",
      "command": "PYTHON",
      "args": ["-m", "tests.servers.spawner"],
      "cwd": "ROOT",
      "envFile": "${workspaceFolder}/.env",
    },
  },
}""".replace("PYTHON", sys.executable).replace("ROOT", str(ROOT))
    )
    written = tmp_path / "gateway.toml"
    imported = run_import(str(mcp_json), "--output", str(written))
    assert imported.returncode == 0, imported.stderr
    checked = subprocess.run(
        [sys.executable, "-m", "gateway", "check", "--config", str(written)],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (tmp_path / "pids").read_text().strip().isdigit()  # the server read the variable
