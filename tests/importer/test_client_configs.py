"""Client configs as they sit on disk, written the way each client's documentation writes them (comments,
trailing commas, inputs, workspace variables, bare URLs), imported into configs the gateway loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config import load_config
from gateway.importer.clients import client_of, read_client_config
from gateway.importer.writer import import_client_config
from gateway.protocol.errors import ConfigError

VSCODE_MCP_JSON = """{
  // Inputs are prompted on first server start, then stored securely by VS Code.
  "inputs": [
    {
      "type": "promptString",
      "id": "api-token",
      "description": "Team prompts API token",
      "password": true,
    },
  ],
  "servers": {
    "team": {
      "type": "http",
      "url": "https://prompts.example.com/mcp",
      "headers": { "Authorization": "Bearer ${input:api-token}" },
    },
    /* a local one */
    "local": {
      "type": "stdio",
      "command": "${userHome}/bin/prompt-server",
      "args": ["--root", "${workspaceFolder}/prompts", "--price", "$5"],
      "envFile": "${workspaceFolder}/.env",
      "env": { "TOKEN": "${env:LOCAL_TOKEN}" },
    },
  },
}
"""


def load(tmp_path: Path, toml: str, **environ: str) -> list[dict[str, object]]:
    path = tmp_path / "gateway.toml"
    path.write_text(toml)
    config = load_config(path, environ={"HOME": "/home/ada", **environ})
    return [u.model_dump(exclude_defaults=True) for u in config.upstreams]


def test_vscode_mcp_json_with_comments_inputs_and_workspace_variables(tmp_path: Path) -> None:
    """It was refused (comments, a trailing comma); ${input:...} was copied and sent upstream as it
    stood; inputs and envFile were dropped; ${workspaceFolder} and ${userHome} stayed literal."""
    imported = import_client_config(VSCODE_MCP_JSON, client="vscode", workspace="/work/site")
    assert "#   API_TOKEN: Team prompts API token" in imported.toml
    assert any("API_TOKEN" in warning for warning in imported.warnings)
    team, local = load(tmp_path, imported.toml, API_TOKEN="s3cret", LOCAL_TOKEN="t")
    assert team["headers"] == {"Authorization": "Bearer s3cret"}
    assert local["command"] == "/home/ada/bin/prompt-server"
    assert local["args"] == ("--root", "/work/site/prompts", "--price", "$5")  # a literal $ stays one
    assert local["env_file"] == "/work/site/.env"
    assert local["env"] == {"TOKEN": "t"}
    unset = load_config(tmp_path / "gateway.toml", environ={"HOME": "/home/ada", "LOCAL_TOKEN": "t"}).upstreams
    assert "API_TOKEN is not set" in (unset[0].unresolved or "")  # that upstream is not started, the other is
    assert unset[1].unresolved is None


def test_an_unknown_workspace_is_named_not_guessed(tmp_path: Path) -> None:
    imported = import_client_config(VSCODE_MCP_JSON, client="vscode")
    assert "#   WORKSPACE_FOLDER:" in imported.toml
    local = load(tmp_path, imported.toml, API_TOKEN="x", LOCAL_TOKEN="t", WORKSPACE_FOLDER="/w")[1]
    assert local["env_file"] == "/w/.env"


def test_vscode_settings_json_keeps_its_servers_under_mcp(tmp_path: Path) -> None:
    settings = '{"editor.fontSize": 14, "mcp": {"servers": {"docs": {"command": "uvx", "args": ["docs-mcp"]}}}}'
    imported = import_client_config(settings)
    assert [(u["namespace"], u["command"]) for u in load(tmp_path, imported.toml)] == [("docs", "uvx")]


def test_cursor_bare_urls_and_windsurf_server_urls(tmp_path: Path) -> None:
    cursor = """{"mcpServers": {
        "events": {"url": "https://old.example.com/sse"},
        "modern": {"url": "https://new.example.com/mcp", "headers": {"X-Key": "${env:KEY}"}},
        "local": {"command": "npx", "args": ["-y", "pkg"], "env": {"A": "${userHome}"}}
    }}"""
    imported = import_client_config(cursor, client="cursor")
    assert any("ends in /sse" in warning for warning in imported.warnings)
    events, modern, local = load(tmp_path, imported.toml, KEY="k")
    assert (events["transport"], modern["transport"]) == ("sse", "streamable-http")
    assert modern["headers"] == {"X-Key": "k"}
    assert local["env"] == {"A": "/home/ada"}
    windsurf = '{"mcpServers": {"remote": {"serverUrl": "https://w.example.com/mcp"}}}'
    (remote,) = load(tmp_path, import_client_config(windsurf, client="windsurf").toml)
    assert remote["url"] == "https://w.example.com/mcp"


def test_an_editors_file_saved_anywhere_is_told_by_its_shape_and_keeps_its_variables(tmp_path: Path) -> None:
    """A tester's Windsurf file outside ~/.codeium/windsurf was read as Claude Desktop's (it has
    ``mcpServers``): its ``Bearer ${env:WS_TOKEN}`` went into the config as that text and would have
    been sent as the header. Windsurf's ``serverUrl`` and an editor's ``${env:X}`` now say which."""
    windsurf = '{"mcpServers": {"r": {"serverUrl": "https://w.example/mcp",'
    windsurf += ' "headers": {"Authorization": "Bearer ${env:WS_TOKEN}"}}}}'
    assert read_client_config(windsurf).client == "windsurf"
    imported = import_client_config(windsurf)
    (remote,) = load(tmp_path, imported.toml, WS_TOKEN="t0ken")
    assert remote["headers"] == {"Authorization": "Bearer t0ken"}
    cursor = '{"mcpServers": {"l": {"command": "npx", "args": ["pkg"], "env": {"KEY": "${env:KEY}"}}}}'
    assert read_client_config(cursor).client == "cursor"
    imported = import_client_config(cursor)
    assert load(tmp_path, imported.toml, KEY="k")[0]["env"] == {"KEY": "k"}
    typed = '{"mcpServers": {"l": {"type": "stdio", "command": "npx", "env": {"T": "${env:GH_TOKEN}"}}}}'
    assert read_client_config(typed).client == "cursor"  # (a reviewer: read as Claude Code's, left literal)
    assert load(tmp_path, import_client_config(typed).toml, GH_TOKEN="g")[0]["env"] == {"T": "g"}
    home = '{"mcpServers": {"l": {"command": "${userHome}/bin/notes"}}}'
    assert load(tmp_path, import_client_config(home).toml)[0]["command"] == "/home/ada/bin/notes"
    desktop = '{"mcpServers": {"l": {"command": "npx", "args": ["pkg", "${NOT_EXPANDED}"]}}}'
    assert read_client_config(desktop).client == "claude-desktop"  # which expands nothing: a $ is a $
    imported = import_client_config(desktop)
    assert load(tmp_path, imported.toml)[0]["args"] == ("pkg", "${NOT_EXPANDED}")


def test_claude_code_mcp_json_and_its_defaults(tmp_path: Path) -> None:
    dot_mcp = """{"mcpServers": {
        "api": {"type": "http", "url": "${API_BASE_URL:-https://api.example.com}/mcp",
                "headers": {"Authorization": "Bearer ${API_KEY}"}},
        "legacy": {"type": "sse", "url": "https://sse.example.com/events"},
        "tool": {"type": "stdio", "command": "node", "args": ["server.js", "costs $5"]}
    }}"""
    imported = import_client_config(dot_mcp)  # told apart from Claude Desktop by its types
    api, legacy, tool = load(tmp_path, imported.toml, API_KEY="k")
    assert api["url"] == "https://api.example.com/mcp"
    assert api["headers"] == {"Authorization": "Bearer k"}
    assert legacy["transport"] == "sse"
    assert tool["args"] == ("server.js", "costs $5")


def test_zed_context_servers_in_both_shapes(tmp_path: Path) -> None:
    zed = """{"theme": "One Dark", "context_servers": {
        "new": {"source": "custom", "command": "uvx", "args": ["a"], "env": {}},
        "old": {"command": {"path": "/usr/bin/b", "args": ["--x"], "env": {"Y": "1"}}},
        "off": {"command": "c", "enabled": false}
    }}"""
    new, old = load(tmp_path, import_client_config(zed, client="zed").toml)
    assert (new["command"], new["args"]) == ("uvx", ("a",))
    assert (old["command"], old["args"], old["env"]) == ("/usr/bin/b", ("--x",), {"Y": "1"})


def test_the_wrong_client_is_told_what_the_file_holds() -> None:
    with pytest.raises(
        ConfigError, match=r'no "context_servers" object with servers found \(the file has "mcpServers"\)'
    ):
        import_client_config('{"mcpServers": {"a": {"command": "x"}}}', client="zed")
    with pytest.raises(ConfigError, match="not valid JSON"):
        import_client_config("{servers: [}")


@pytest.mark.parametrize(
    ("path", "client", "project"),
    [
        ("/work/site/.cursor/mcp.json", "cursor", "/work/site"),
        ("/work/site/.mcp.json", "claude-code", "/work/site"),
        ("/work/site/.vscode/mcp.json", "vscode", "/work/site"),
        ("/home/ada/.codeium/windsurf/mcp_config.json", "windsurf", None),
        ("/home/ada/.config/Code/User/settings.json", "vscode", None),
        ("/home/ada/.config/zed/settings.json", "zed", None),
        ("/home/ada/.config/Claude/claude_desktop_config.json", "claude-desktop", None),
        ("/srv/servers.json", "auto", None),
    ],
)
def test_a_file_says_its_client_by_its_name_and_place(path: str, client: str, project: str | None) -> None:
    """Told by shape alone, a Cursor file was read as Claude Code's (its ${env:X} sent upstream as written),
    a Windsurf one as Claude Desktop's, and a .mcp.json without types lost its ${VAR:-default}."""
    assert client_of(path) == (client, project)


def test_a_projects_servers_start_in_the_project(tmp_path: Path) -> None:
    """Clients start a project's servers in its folder: imported without a cwd, ``srv.py`` was not found."""
    dot_mcp = '{"mcpServers": {"rel": {"command": "python3", "args": ["srv.py"], "env": {"P": "${K:-fallback}"}}}}'
    client, project = client_of("/work/site/.mcp.json")
    (rel,) = load(tmp_path, import_client_config(dot_mcp, client=client, project=project).toml)  # type: ignore[arg-type]
    assert (rel["cwd"], rel["env"]) == ("/work/site", {"P": "fallback"})
    cursor = '{"mcpServers": {"api": {"url": "https://c.example.com/mcp", "headers": {"K": "${env:CK}"}}}}'
    (api,) = load(tmp_path, import_client_config(cursor, client=client_of("/w/.cursor/mcp.json")[0]).toml, CK="k")
    assert api["headers"] == {"K": "k"}


def test_an_inputs_default_and_the_environment_the_client_read_are_said(tmp_path: Path) -> None:
    """A pickString's default was dropped (the variable was then required), and the header named no
    ${env:X} variable although the gateway exits without it."""
    mcp_json = """{"inputs": [{"type": "pickString", "id": "mode", "description": "Mode", "options": ["a", "b"],
                               "default": "a"}],
                   "servers": {"s": {"command": "x", "env": {"MODE": "${input:mode}", "K": "${env:KEY}"}}}}"""
    imported = import_client_config(mcp_json, client="vscode")
    assert "#   MODE: Mode (default 'a')" in imported.toml
    assert "#   KEY: from the environment" in imported.toml
    (server,) = load(tmp_path, imported.toml, KEY="k")
    assert server["env"] == {"MODE": "a", "K": "k"}


def test_inputs_named_as_the_systems_variables_or_as_each_other_stay_apart(tmp_path: Path) -> None:
    """A tester's inputs ``path``, ``user`` and ``tz`` became ``${PATH}``, ``${USER}`` and ``${TZ}``: the
    gateway filled them from its own environment (the repository path was the shell's PATH, the database
    user the login name), and the header said to set PATH. ``api-key`` and ``api_key`` became one
    ``${API_KEY}``: one secret for two servers."""
    mcp_json = """{"inputs": [
        {"type": "promptString", "id": "path", "description": "Path to the repository"},
        {"type": "promptString", "id": "user", "description": "Postgres user name"},
        {"type": "pickString", "id": "tz", "description": "Time zone", "options": ["UTC"], "default": "UTC"},
        {"type": "promptString", "id": "api-key", "description": "Key for service A", "password": true},
        {"type": "promptString", "id": "api_key", "description": "Key for service B", "password": true},
        {"type": "promptString", "id": "1password", "description": "A vault token"}],
      "servers": {
        "git": {"command": "git-mcp", "args": ["--repo", "${input:path}"], "env": {"PGUSER": "${input:user}"}},
        "clock": {"command": "clock-mcp", "env": {"TZ": "${input:tz}", "V": "${input:1password}"}},
        "a": {"command": "a-mcp", "env": {"KEY": "${input:api-key}"}},
        "b": {"command": "b-mcp", "env": {"KEY": "${input:api_key}"}},
        "c": {"command": "c-mcp", "env": {"KEY": "${input:api-key}"}}}}"""
    imported = import_client_config(mcp_json, client="vscode")
    for line in (
        "#   INPUT_PATH: Path to the repository",
        "#   INPUT_USER: Postgres user name",
        "#   INPUT_TZ: Time zone (default 'UTC')",
        "#   API_KEY: Key for service A",
        "#   API_KEY_2: Key for service B",
        "#   INPUT_1PASSWORD: A vault token",
    ):
        assert line in imported.toml
    system = {"PATH": "/usr/bin:/bin", "USER": "alice", "TZ": "Europe/Paris"}
    chosen = {"INPUT_PATH": "/srv/repo", "INPUT_USER": "pg", "API_KEY": "a", "API_KEY_2": "b", "INPUT_1PASSWORD": "v"}
    git, clock, a, b, c = load(tmp_path, imported.toml, **system, **chosen)
    assert (git["args"], git["env"]) == (("--repo", "/srv/repo"), {"PGUSER": "pg"})
    assert clock["env"] == {"TZ": "UTC", "V": "v"}
    assert (a["env"], b["env"], c["env"]) == ({"KEY": "a"}, {"KEY": "b"}, {"KEY": "a"})  # one input, one variable
    assert "API_KEY_3" not in imported.toml


def test_an_input_takes_no_variable_the_file_names_otherwise_whichever_comes_first(tmp_path: Path) -> None:
    """A reviewer: an input met before ``${env:API_KEY}`` took ``API_KEY`` (server A got B's secret), an
    input ``workspace-folder`` was the unknown workspace's ``WORKSPACE_FOLDER``, and a disabled server's
    input took an enabled server's ``${env:TOKEN}``."""
    mcp_json = """{"inputs": [{"type": "promptString", "id": "api_key", "description": "Key for A"},
                              {"type": "promptString", "id": "workspace-folder", "description": "A folder"},
                              {"type": "promptString", "id": "token", "description": "C's token"}],
      "servers": {
        "a": {"command": "a-mcp", "args": ["${input:workspace-folder}"], "env": {"K": "${input:api_key}"}},
        "b": {"command": "b-mcp", "args": ["${workspaceFolder}"], "env": {"K": "${env:API_KEY}", "T": "${env:TOKEN}"}},
        "c": {"command": "c-mcp", "env": {"X": "${input:token}"}, "disabled": true}}}"""
    imported = import_client_config(mcp_json, client="vscode")
    assert "#   API_KEY_2: Key for A" in imported.toml
    assert "#   WORKSPACE_FOLDER_2: A folder" in imported.toml
    assert '# env = { "X" = "${TOKEN_2}" }' in imported.toml
    environ = {"API_KEY": "b", "API_KEY_2": "a", "WORKSPACE_FOLDER": "/ws", "WORKSPACE_FOLDER_2": "/a", "TOKEN": "t"}
    a, b = load(tmp_path, imported.toml, **environ)
    assert (a["args"], a["env"]) == (("/a",), {"K": "a"})
    assert (b["args"], b["env"]) == (("/ws",), {"K": "b", "T": "t"})


def test_words_from_the_clients_file_cannot_add_to_the_config_or_steer_a_terminal(tmp_path: Path) -> None:
    """An input's description was copied into a header comment as it stood: a line break in it started
    a line of config (here a policy hiding everything), and a server's name kept its C1 controls."""
    mcp_json = """{"inputs": [{"type": "promptString", "id": "key",
                               "description": "Key\\n[policy]\\ndeny = [\\"*\\"]\\u001b[2J"}],
                   "servers": {"evil\\u009b2J\\u202e": {"command": "x\\u0085", "env": {"K": "${input:key}"}}}}"""
    imported = import_client_config(mcp_json, client="vscode")
    assert '#   KEY: Key\\n[policy]\\ndeny = ["*"]\\x1b[2J' in imported.toml
    assert '[[upstreams]]  # "evil\\u009b2J\\u202e"' in imported.toml
    assert imported.toml.replace("\n", "").isprintable()
    path = tmp_path / "gateway.toml"
    path.write_text(imported.toml)
    config = load_config(path, environ={"KEY": "k"})
    assert config.policy.deny == ()
    assert config.upstreams[0].command == "x\x85"


def _import_command(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "import", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )


def test_claude_codes_own_file_with_each_projects_servers(tmp_path: Path) -> None:
    """``claude mcp add`` puts a server under its project in ``~/.claude.json`` by default (local scope):
    import read only the top-level ``mcpServers`` and dropped the project's without a word, ignored
    ``--workspace``, and refused a file holding only projects' servers as having none."""
    project = tmp_path / "site"
    project.mkdir()
    claude_json = tmp_path / ".claude.json"
    claude_json.write_text(
        json.dumps(
            {
                "numStartups": 12,
                "mcpServers": {
                    "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"], "env": {}},
                    "shared": {"type": "stdio", "command": "user-version", "args": [], "env": {}},
                },
                "projects": {
                    str(project): {
                        "allowedTools": [],
                        "mcpServers": {
                            "everything": {"type": "stdio", "command": "npx", "args": ["-y", "srv"], "env": {}},
                            "shared": {"type": "stdio", "command": "project-version", "args": [], "env": {}},
                        },
                    },
                    "/elsewhere": {"allowedTools": [], "mcpServers": {}},
                },
            }
        )
    )
    mine = _import_command(str(claude_json), cwd=tmp_path)
    assert mine.returncode == 0, mine.stderr
    assert [u["namespace"] for u in load(tmp_path, mine.stdout)] == ["fetch", "shared"]
    assert f"projects' own servers (local scope) not imported: {project} (everything, shared)" in mine.stderr
    assert "--workspace PROJECT_FOLDER" in mine.stderr

    with_project = _import_command(str(claude_json), "--workspace", "site", cwd=tmp_path)  # relative, as typed
    assert with_project.returncode == 0, with_project.stderr
    fetch, shared, everything = load(tmp_path, with_project.stdout)
    assert (fetch["namespace"], everything["namespace"]) == ("fetch", "everything")
    assert shared["command"] == "project-version"  # the project's wins a shared name, as in Claude Code
    assert everything["cwd"] == str(project)  # started in the project, as Claude Code starts it
    assert "not imported" not in with_project.stderr

    only_projects = tmp_path / "only" / ".claude.json"
    only_projects.parent.mkdir()
    only_projects.write_text(json.dumps({"projects": {str(project): {"mcpServers": {"e": {"command": "npx"}}}}}))
    refused = _import_command(str(only_projects), "--workspace", "/nowhere", cwd=tmp_path)
    assert refused.returncode == 2
    assert f"only projects' (local scope): {project} (e): pass --workspace PROJECT_FOLDER" in refused.stderr
    assert "(/nowhere is none of them)" in refused.stderr
