"""What import says about a server it cannot take as written, with configs written the way each client's
documentation (or a server's README) writes them: a server turned off in the client, a placeholder
copied as a value, a bare ``python``, and no ``HOME`` to set. Before, each passed without a word."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config import load_config
from gateway.importer.notes import placeholder
from gateway.importer.writer import import_client_config
from gateway.protocol.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

WINDSURF = """{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "disabled": false,
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${env:GH_TOKEN}"}
    },
    "git": {
      "command": "uvx",
      "args": ["mcp-server-git", "--repository", "${workspaceFolder}"],
      "disabled": true,
      "env": {"KEY": "${env:GIT_KEY}"}
    }
  }
}
"""


def servers(toml: str, tmp_path: Path, **environ: str) -> list[str]:
    path = tmp_path / "gateway.toml"
    path.write_text(toml)
    return [u.namespace for u in load_config(path, environ={"HOME": "/home/ada", **environ}).upstreams]


def turned_on(toml: str) -> str:
    """The output with its disabled servers turned on, as its comment tells the person to do."""
    return re.sub(r"(?m)^# (?=\[\[upstreams\]\]|[a-z_]+ = )", "", toml)


def test_a_disabled_server_is_written_commented_out_and_named(tmp_path: Path) -> None:
    """Windsurf's ``"disabled": true``: the server was dropped without a word."""
    imported = import_client_config(WINDSURF, client="windsurf", workspace="/work/site")
    assert "git: disabled in the client: written commented out (uncomment it to serve it)" in imported.warnings
    assert "# It then needs GIT_KEY set in the gateway's environment." in imported.toml
    assert not any("GIT_KEY" in warning for warning in imported.warnings if not warning.startswith("git:"))
    assert '# [[upstreams]]  # "git"' in imported.toml
    assert servers(imported.toml, tmp_path, GH_TOKEN="t") == ["github"]
    assert servers(turned_on(imported.toml), tmp_path, GH_TOKEN="t", GIT_KEY="k") == ["github", "git"]


def test_a_disabled_server_turned_on_as_its_comment_says_is_valid(tmp_path: Path) -> None:
    """A tester took "remove the '# ' before each line of it" literally: the notes above the server
    were uncommented too, and the file was no TOML. The instruction now comes after the notes, and says
    "each line below"."""
    off = '"off": {"command": "python3", "disabled": true}'
    mcp_json = '{"mcpServers": {"on": {"command": "uvx", "args": ["a"]}, ' + off + "}}"
    imported = import_client_config(mcp_json, client="claude-desktop")
    lines = imported.toml.splitlines()
    start = next(i for i, line in enumerate(lines) if "remove the '# ' before each line below" in line) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("# ")), len(lines))
    assert any("Note:" in line for line in lines[:start])  # python3's note, said above the instruction
    lines[start:end] = [line.removeprefix("# ") for line in lines[start:end]]
    assert servers("\n".join(lines) + "\n", tmp_path) == ["on", "off"]


def test_a_file_of_the_gateway_alone_says_so() -> None:
    """A tester imported a client file whose only server was the gateway: "none usable", and no why."""
    own = '{"mcpServers": {"prompts": {"command": "prompt-gateway", "args": ["serve", "--config", "g.toml"]}}}'
    with pytest.raises(ConfigError, match="no server the gateway can run: prompts: this is prompt-gateway itself"):
        import_client_config(own, client="claude-desktop")


def test_zeds_enabled_false_is_said_too(tmp_path: Path) -> None:
    zed = '{"context_servers": {"on": {"command": "uvx", "args": ["a"]}, "off": {"command": "c", "enabled": false}}}'
    imported = import_client_config(zed, client="zed")
    assert any(warning.startswith("off: disabled in the client") for warning in imported.warnings)
    assert servers(imported.toml, tmp_path) == ["on"]


def test_a_file_whose_servers_are_all_disabled_says_which() -> None:
    with pytest.raises(ConfigError, match=r"every server the file lists is disabled in the client \(a, b\)"):
        import_client_config(
            '{"mcpServers": {"a": {"command": "x", "disabled": true}, "b": {"url": '
            '"https://b.example.com/mcp", "disabled": true}}}',
            client="windsurf",
        )


CLAUDE_DESKTOP = """{
  "mcpServers": {
    "github": {
      "command": "docker",
      "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "<YOUR_TOKEN>"}
    },
    "brave-search": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-brave-search"],
      "env": {"BRAVE_API_KEY": "YOUR_API_KEY_HERE"}
    },
    "openai": {"command": "/usr/bin/python3", "args": ["-m", "srv"], "env": {"OPENAI_API_KEY": "sk-..."}},
    "weather": {"command": "python", "args": ["weather.py"]},
    "real": {"command": "uvx", "args": ["go-tool", "./..."],
             "env": {"TOKEN": "ghp_16C7e42F292c6912E7710c838347Ae178B4a"}}
  }
}
"""


def test_placeholders_and_a_bare_python_are_noted_where_they_stand(tmp_path: Path) -> None:
    """GitHub's and Brave's READMEs write ``<YOUR_TOKEN>`` and ``YOUR_API_KEY_HERE``: they were kept as
    if real and sent upstream; ``python`` ran the gateway's own venv Python without the server's packages."""
    imported = import_client_config(CLAUDE_DESKTOP, client="claude-desktop")
    said = "\n".join(imported.warnings)
    assert "github: env.GITHUB_PERSONAL_ACCESS_TOKEN holds the placeholder '<YOUR_TOKEN>', not a value" in said
    assert "brave-search: env.BRAVE_API_KEY holds the placeholder 'YOUR_API_KEY_HERE'" in said
    assert "openai: env.OPENAI_API_KEY holds the placeholder '...'" in said
    assert "weather: command 'python' is looked up on the gateway's PATH" in said
    assert "absolute path or run the server with uvx" in said
    assert "real:" not in said
    assert "openai: command" not in said
    comments = [line for line in imported.toml.splitlines() if line.startswith("# Note:")]
    assert len(comments) == 4
    assert imported.toml.index("# Note: env.GITHUB") < imported.toml.index('[[upstreams]]  # "github"')
    assert servers(imported.toml, tmp_path) == ["github", "brave-search", "openai", "weather", "real"]


@pytest.mark.parametrize(
    ("value", "secret", "found"),
    [
        ("Bearer <token>", True, "<token>"),
        ("https://<your-server>/mcp", False, "<your-server>"),
        ("your-token-here", True, "your-token-here"),
        ("ghp_XXXXXXXXXXXX", True, "XXXXXXXXXXXX"),
        ("xxx", False, "xxx"),
        ("REPLACE_ME", False, "REPLACE_ME"),
        ("sk-…", True, "…"),
        ("...", False, "..."),
        ("./...", False, None),
        ("wait...", False, None),
        ("Bearer ${API_KEY}", True, None),
        ("${YOUR_TOKEN}", True, None),  # a variable: the value is the environment's
        ("a8Xxx9QvZ", True, None),
        ("boxxxed", False, None),
        ("<", False, None),
        ("/path/to/server", False, "/path/to/server"),  # Claude Code's documentation
        (
            "/ABSOLUTE/PATH/TO/PARENT/FOLDER/weather/weather.py",  # the MCP quickstart's, for Claude Desktop
            False,
            "/ABSOLUTE/PATH/TO/PARENT/FOLDER/weather/weather.py",
        ),
        ("--config=C:\\path\\to\\cfg.json", False, "--config=C:\\path\\to\\cfg.json"),
        ("/srv/xpath/top/a", False, None),
        ("/srv/path/tools", False, None),
    ],
)
def test_the_placeholder_rule(value: str, secret: bool, found: str | None) -> None:
    assert placeholder(value, secret=secret) == found


def test_home_is_not_a_variable_to_set(tmp_path: Path) -> None:
    """``${HOME}`` (Claude Code) and ``${env:HOME}`` (VS Code) were listed as variables to set."""
    dot_mcp = '{"mcpServers": {"s": {"type": "stdio", "command": "${HOME}/bin/s", "env": {"K": "${KEY}"}}}}'
    imported = import_client_config(dot_mcp, client="claude-code")
    assert "HOME" not in "\n".join(imported.warnings)
    assert "#   HOME" not in imported.toml
    assert "#   KEY:" in imported.toml
    vscode = '{"servers": {"v": {"command": "node", "args": ["${env:HOME}/s.js", "${env:PATH}"]}}}'
    imported = import_client_config(vscode, client="vscode")
    assert imported.warnings == ()
    path = tmp_path / "v.toml"
    path.write_text(imported.toml)
    (v,) = load_config(path, environ={"HOME": "/home/ada", "PATH": "/bin"}).upstreams
    assert v.args == ("/home/ada/s.js", "/bin")  # type: ignore[union-attr]


def test_the_command_says_it_all_on_stderr_and_help_names_every_client(tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(CLAUDE_DESKTOP.replace('"real"', '"off": {"command": "x", "disabled": true}, "real"'))
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "import", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for said in (
        "github: env.GITHUB_PERSONAL_ACCESS_TOKEN holds the placeholder",
        "weather: command 'python'",
        "off: disabled in the client",
    ):
        assert f"prompt-gateway: warning: {said}" in result.stderr
    assert '# [[upstreams]]  # "off"' in result.stdout
    help_text = subprocess.run(
        [sys.executable, "-m", "gateway", "import", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=True,
    ).stdout
    for client in ("Claude Desktop", "Claude Code", "Cursor", "Windsurf", "VS Code", "Zed"):
        assert client in " ".join(help_text.split())


CLAUDE_JSON_PROJECT = {
    "mcpServers": {
        "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"], "env": {}},
        "gateway": {
            "type": "stdio",
            "command": "/home/ada/.local/bin/prompt-gateway",
            "args": ["serve", "--config", "/home/ada/gateway.toml"],
            "env": {},
        },
        "gateway-uvx": {"type": "stdio", "command": "uvx", "args": ["mcp-prompt-gateway[telemetry]", "serve"]},
        "gateway-module": {"type": "stdio", "command": "python3", "args": ["-m", "gateway", "serve"]},
    },
    "projects": {
        "/work/site": {
            "mcpServers": {
                "linear": {"type": "http", "url": "https://mcp.linear.app/mcp"},
                "sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp", "oauth": {"clientId": "abc"}},
            },
            "disabledMcpServers": ["fetch"],
        }
    },
}


def test_claude_codes_own_file_as_the_project_has_it(tmp_path: Path) -> None:
    """Three things import passed without a word: a server turned off in the project with ``/mcp disable``
    (``disabledMcpServers`` in ~/.claude.json) was imported turned on; a client already pointed at the
    gateway had the gateway import itself as a server; and a remote server the client signs in to with
    OAuth was imported as if a request without a token would do."""
    imported = import_client_config(json.dumps(CLAUDE_JSON_PROJECT), workspace="/work/site")
    assert "fetch: disabled in the client: written commented out (uncomment it to serve it)" in imported.warnings
    for name in ("gateway", "gateway-uvx", "gateway-module"):
        assert any(w.startswith(f"{name}: this is prompt-gateway itself: left out") for w in imported.warnings)
    assert any(w.startswith("sentry: the client signs in to this server itself (OAuth") for w in imported.warnings)
    assert any(
        w.startswith("linear: a remote server with no headers: if it asks for a sign-in") for w in imported.warnings
    )
    assert "# Note: a remote server with no headers: if it asks for a sign-in" in imported.toml  # said twice
    assert "# Note: the client signs in to this server itself" in imported.toml
    assert servers(imported.toml, tmp_path) == ["linear", "sentry"]
    assert servers(turned_on(imported.toml), tmp_path) == ["fetch", "linear", "sentry"]


def test_a_workspace_the_file_does_not_know_is_said_plainly() -> None:
    """It read "...pass --workspace PROJECT_FOLDER to import that project's servers (/x is none of them)
    as well" after a --workspace had been passed."""
    imported = import_client_config(json.dumps(CLAUDE_JSON_PROJECT), workspace="/work/elsewhere")
    assert "--workspace /work/elsewhere: the file has no project of that folder, so only your own servers" in "\n".join(
        imported.warnings
    )
    assert not any("pass --workspace" in warning for warning in imported.warnings)


def test_claude_codes_own_file_read_as_another_clients_says_so() -> None:
    imported = import_client_config(json.dumps(CLAUDE_JSON_PROJECT), client="claude-desktop")
    assert any("looks like Claude Code's ~/.claude.json" in warning for warning in imported.warnings)
