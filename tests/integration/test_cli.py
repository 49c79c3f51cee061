"""The command line as a user runs it: exit codes, tables, logs, shutdown."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.integration.helpers import (
    ROOT,
    demo_upstream,
    gateway_command,
    process_gone,
    running_gateway,
    sdk_upstream,
    team_skills,
    write_config,
)
from tests.integration.services import free_port

pytestmark = pytest.mark.slow
EXAMPLE = ROOT / "config.example.toml"


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)


def test_check_on_the_example_config() -> None:
    result = run(*gateway_command(EXAMPLE, "check"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["UPSTREAM", "TRANSPORT", "STATE", "PROMPTS", "DETAIL"]
    assert lines[1].split()[:4] == ["writing", "stdio", "ready", "3"]
    assert lines[2].split()[:4] == ["eng", "stdio", "ready", "4"]
    assert "5 prompts visible through the gateway after policy." in result.stdout


def test_check_fails_and_names_a_broken_upstream_while_the_others_start(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml",
        [
            demo_upstream("writing", "writing"),
            {"namespace": "broken", "command": str(tmp_path / "no-such-server"), "timeout_s": 5},
            {
                "namespace": "noprompts",
                "command": "python3",
                "args": ["-c", "import sys; sys.stdin.read()"],
                "timeout_s": 1,
            },
        ],
    )
    result = run(*gateway_command(config, "check"))
    assert result.returncode == 1
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:] if line.strip()}
    assert rows["writing"].split()[2] == "ready"
    assert rows["broken"].split()[2] == "backing-off"
    assert "No such file or directory" in rows["broken"]
    assert "did not answer initialize" in rows["noprompts"]


def test_check_says_a_skill_refused_under_both_is_still_a_prompt_and_not_a_broken_file(tmp_path: Path) -> None:
    """Under ``skills_as = "both"`` a SKILL.md the spec refuses as a skill still serves as a prompt: check
    names it as refused as a skill, not as a broken file, and a file broken as a prompt stays broken."""
    skills = tmp_path / "repo" / ".claude" / "skills"
    (skills / "other").mkdir(parents=True)
    (skills / "other" / "SKILL.md").write_text("---\nname: not-other\ndescription: x\n---\nBody\n")
    (skills / "good").mkdir()
    (skills / "good" / "SKILL.md").write_text("---\nname: good\ndescription: x\n---\nBody\n")
    (tmp_path / "repo" / ".claude" / "commands").mkdir()
    (tmp_path / "repo" / ".claude" / "commands" / "bad.md").write_bytes(b"\xff not UTF-8")
    upstream = {"namespace": "team", "transport": "files", "path": str(tmp_path / "repo"), "format": "claude-code"}
    both = write_config(tmp_path / "both.toml", [{**upstream, "skills_as": "both"}])
    result = run(*gateway_command(both, "check"))
    assert result.returncode == 1
    row = next(line for line in result.stdout.splitlines() if line.startswith("team "))
    assert "1 broken files, 1 refused as skills (below); the others serve" in row
    refused = "team: not a skill (still served as a prompt): .claude/skills/other/SKILL.md: not served as a skill: "
    assert refused + "the name 'not-other' is not its folder's ('other')" in result.stdout
    assert "team: broken: .claude/skills/other" not in result.stdout
    assert "team: broken: .claude/commands/bad.md" in result.stdout
    only = write_config(tmp_path / "only.toml", [{**upstream, "skills_as": "skills"}])
    result = run(*gateway_command(only, "check"))
    assert "team: broken: .claude/skills/other/SKILL.md: not served as a skill: " in result.stdout  # nothing serves it
    assert "2 broken files (below)" in result.stdout


def test_check_and_list_show_the_skills_of_a_folder_served_as_skills_alone(tmp_path: Path) -> None:
    """Under ``skills_as = "skills"`` check counts the skills (and says no prompt-name note: those files
    are no prompts), list shows the skills a client sees after policy, and list --json, which gives the
    prompts, says where the skills are."""
    upstream = {"namespace": "team", "transport": "files", "path": str(team_skills(tmp_path / "repo"))}
    config = write_config(
        tmp_path / "c.toml", [{**upstream, "skills_as": "skills"}], policy={"deny": ["team__billing/*"]}
    )
    checked = run(*gateway_command(config, "check"))
    assert checked.returncode == 0, checked.stdout
    lines = checked.stdout.splitlines()
    assert lines[0].split() == ["UPSTREAM", "TRANSPORT", "STATE", "PROMPTS", "SKILLS", "DETAIL"]
    assert lines[1].split()[:5] == ["team", "files", "ready", "0", "3"]
    assert "note" not in checked.stdout
    assert "0 prompts and 2 skills visible through the gateway after policy." in checked.stdout
    listed = run(*gateway_command(config, "list"))
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[:2] for line in listed.stdout.splitlines()] == [
        ["SKILL", "FILES"],
        ["skill://team/pdf/SKILL.md", "2"],
        ["skill://team/refunds/SKILL.md", "1"],
    ]
    hidden = run(*gateway_command(config, "list", "--tag", "no-such-tag"))
    assert hidden.stdout.splitlines() == [  # it printed the table's header alone
        "No skills are visible through the gateway ('check' names a skill folder it could not serve)."
    ]
    as_json = run(*gateway_command(config, "list", "--json"))
    assert json.loads(as_json.stdout) == []
    assert "2 skills are served too: 'list --skills --json' lists them" in as_json.stderr
    tagged = run(*gateway_command(config, "list", "--skills", "--json", "--tag", "docs"))
    assert json.loads(tagged.stdout) == [
        {
            "uri": "skill://team/pdf/SKILL.md",
            "name": "pdf",
            "policyName": "team__pdf",
            "description": "Fill PDF forms",
            "files": 2,
            "tags": ["docs"],
        }
    ]


def test_check_counts_relayed_skills_and_names_an_upstream_that_declares_none(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml",
        [
            sdk_upstream("docs", "skills_upstream", relay_skills=True),
            demo_upstream("plain", "writing", relay_skills=True),
        ],
    )
    checked = run(*gateway_command(config, "check"))
    assert checked.returncode == 0, checked.stdout
    rows = {line.split()[0]: line for line in checked.stdout.splitlines()[1:] if line.strip()}
    assert rows["docs"].split()[:5] == ["docs", "stdio", "ready", "3", "2"]
    assert rows["plain"].split()[3:5] == ["3", "0"]
    assert rows["plain"].endswith("declares no Skills extension: no skills to relay")
    assert "6 prompts and 2 skills visible through the gateway after policy." in checked.stdout


def test_list_prints_the_policy_filtered_list(tmp_path: Path) -> None:
    table = run(*gateway_command(EXAMPLE, "list"))
    assert table.returncode == 0, table.stderr
    names = [line.split()[0] for line in table.stdout.splitlines()[1:]]
    assert names == [
        "writing__summarize",
        "writing__translate",
        "eng__code_review",
        "eng__commit_message",
        "eng__explain_error",
    ]
    as_json = run(*gateway_command(EXAMPLE, "list", "--json"))
    prompts = json.loads(as_json.stdout)
    assert [p["name"] for p in prompts] == names
    assert prompts[1]["arguments"][1] == {"name": "language", "description": "The target language", "required": True}


def test_config_errors_exit_2_naming_the_key(tmp_path: Path) -> None:
    bad = write_config(tmp_path / "bad.toml", [{"namespace": "x y", "command": "python3"}])
    result = run(*gateway_command(bad, "check"))
    assert result.returncode == 2
    assert "upstreams[0].namespace: 'x y' is not a valid namespace" in result.stderr
    bad.write_text(
        '[gateway]\npage_size = 0\ncursor_secret = "short-secret"\n'
        '[[upstreams]]\nnamespace = "c"\ntransport = "ftp"\nurl = "x"\n'
    )
    result = run(*gateway_command(bad, "check"))
    assert result.returncode == 2
    assert "upstreams[0]: transport 'ftp' is not one of" in result.stderr
    assert "gateway.page_size: Input should be greater than or equal to 1 (got 0)" in result.stderr
    assert "short-secret" not in result.stderr  # a secret is never echoed


def test_newcomer_rough_edges(tmp_path: Path) -> None:
    help_text = run(*gateway_command(EXAMPLE)[:3], "--help").stdout
    assert "Serve the prompts of many MCP servers" in help_text
    assert "Thin:" not in help_text  # the module's docstring is for developers
    empty = tmp_path / "none.toml"
    empty.write_text("[gateway]\npage_size = 5\n")
    result = run(*gateway_command(empty, "check"))
    assert (result.returncode, result.stderr.strip()) == (
        1,
        "prompt-gateway: the config has no [[upstreams]]: there is nothing to serve",
    )
    source = ROOT / "examples" / "claude_desktop_config.json"
    taken = tmp_path / "taken.toml"
    taken.write_text("")
    command = gateway_command(EXAMPLE)[:3]
    result = run(*command, "import", "--log-level", "info", str(source), "-o", str(taken))
    assert (result.returncode, result.stderr.strip()) == (
        2,
        f"prompt-gateway: {taken} exists already; choose another file or remove it",
    )


def test_upstream_stderr_is_logged_as_structured_events(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", [sdk_upstream("dyn", "dynamic")])
    result = run(*gateway_command(config, "check", "--log-level", "info"))
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stderr.splitlines()]
    stderr_events = [e for e in events if e["event"] == "upstream_stderr"]
    assert {"upstream": "dyn", "line": "dynamic server starting"}.items() <= stderr_events[0].items()
    assert any(e["event"] == "upstream_state" and e["state"] == "ready" for e in events)


@pytest.mark.anyio
async def test_serve_exits_cleanly_on_sigterm_and_leaves_no_orphans(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", [sdk_upstream("dyn", "dynamic")])
    async with await anyio.open_process(gateway_command(config, "serve"), cwd=ROOT) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        for message in (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": {"name": "dyn__pid"}},
        ):
            await process.stdin.send(json.dumps(message).encode() + b"\n")
        received = b""
        with anyio.fail_after(20):
            while b'"id":2' not in received:
                received += await process.stdout.receive()
        answer = next(m for m in map(json.loads, received.splitlines()) if m.get("id") == 2)
        pid = int(answer["result"]["messages"][0]["content"]["text"])
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(20):
            assert await process.wait() == 0
    with anyio.fail_after(10):
        while not process_gone(pid):
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_health_follows_the_configured_port(tmp_path: Path) -> None:
    """The Docker health check: `health` reads the address from the config and asks its /healthz."""
    port = free_port()
    config = write_config(
        tmp_path / "c.toml", [demo_upstream("writing", "writing")], server={"transport": "http", "port": port}
    )
    async with running_gateway(config):
        healthy = await anyio.run_process(gateway_command(config, "health"), cwd=ROOT, check=False)
    assert healthy.returncode == 0, healthy.stderr
    assert healthy.stdout.decode().strip() == f"http://127.0.0.1:{port}/healthz: 200"
    gone = await anyio.run_process(gateway_command(config, "health"), cwd=ROOT, check=False)
    assert gone.returncode == 1
    assert f"http://127.0.0.1:{port}/healthz" in gone.stderr.decode()
    stdio = write_config(tmp_path / "s.toml", [demo_upstream("writing", "writing")])
    not_http = await anyio.run_process(gateway_command(stdio, "health"), cwd=ROOT, check=False)
    assert not_http.returncode == 2
    assert "serves stdio" in not_http.stderr.decode()


def test_an_upstream_named_like_a_secret_keeps_its_state_in_the_log(tmp_path: Path) -> None:
    """The log's redaction blanks fields named like secrets, and ``gateway_started`` keyed each upstream's
    state by its namespace: an upstream named ``secrets`` (a secrets manager's prompts) or ``token`` showed
    ``[redacted]`` where its state belongs."""
    config = write_config(
        tmp_path / "g.toml", [demo_upstream("secrets", "writing"), demo_upstream("token", "engineering")]
    )
    serve = [*gateway_command(config, "serve"), "--log-level", "info"]
    result = subprocess.run(serve, input="", capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr
    (started,) = [e for e in map(json.loads, result.stderr.splitlines()) if e["event"] == "gateway_started"]
    assert started["upstreams"] == [
        {"upstream": "secrets", "state": "starting"},
        {"upstream": "token", "state": "starting"},
    ]


def test_a_servers_env_values_are_masked_in_what_its_stderr_said(tmp_path: Path) -> None:
    """A tester's server printed its API key and exited: ``check``, the log and the operator page quoted
    it, where the docs say env values are never logged. Each value is shown as the variable holding it;
    a reviewer's key over several lines (an env file's quoted PEM) and a value ending in a space too."""
    secret, short, spaced = "sk-live-0123456789abcdef", "dev", "tok-with-space "
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    (tmp_path / "server.env").write_text(f'PEM="{pem}"\n')
    said = "'with key', os.environ['API_KEY'], 'in', os.environ['MODE'], os.environ['SPACED']"
    leaky = f"import os, sys; print(os.environ['PEM'], file=sys.stderr); print({said}, file=sys.stderr)"
    env = {"API_KEY": secret, "MODE": short, "SPACED": spaced}
    leaking = {"namespace": "leaky", "command": "python3", "args": ["-c", leaky], "env": env, "env_file": "server.env"}
    config = write_config(tmp_path / "c.toml", [leaking])
    result = run(*gateway_command(config, "check", "--log-level", "info"))
    assert result.returncode == 1
    for kept_secret in (secret, spaced.strip(), "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"):
        assert kept_secret not in result.stdout + result.stderr
    (row,) = [line for line in result.stdout.splitlines() if line.startswith("leaky ")]
    assert "its stderr ended with: ${PEM} | ${PEM} | ${PEM} | with key ${API_KEY} in dev ${SPACED}" in row
    assert '"line":"with key ${API_KEY} in dev ${SPACED}"' in result.stderr  # the upstream_stderr log line


def test_check_notes_overrides_that_name_nothing_the_upstream_lists(tmp_path: Path) -> None:
    typo = {**demo_upstream("writing", "writing"), "overrides": {"sumarize": {"title": "S"}}}
    result = run(*gateway_command(write_config(tmp_path / "c.toml", [typo]), "check"))
    assert result.returncode == 0, result.stdout  # a note: a server may list the prompt later
    assert (
        "writing: note: the override of 'sumarize' names no prompt this upstream lists (did you mean" in result.stdout
    )
