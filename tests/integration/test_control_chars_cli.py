"""An upstream (an SDK server) whose prompt names, descriptions, argument names and server name carry
terminal escapes: no command of the command line lets one reach the terminal, and the catalog serves
no prompt under a name that holds one (docs/catalog.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.integration.helpers import ROOT, gateway_command, sdk_upstream, write_config

pytestmark = pytest.mark.slow

STEERING = [b"\x1b", b"\x07", "\x9b".encode(), "\u202e".encode()]


def run(config: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    ran = subprocess.run(gateway_command(config, *args), cwd=ROOT, capture_output=True, check=False, timeout=60)
    for output in (ran.stdout, ran.stderr):
        assert not [ch for ch in STEERING if ch in output], (args, output)
    return ran


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "g.toml", [sdk_upstream("bad", "hostile_names")])


def test_explain_all_shows_the_hostile_name_escaped_and_hidden(config: Path) -> None:
    explained = run(config, "explain", "--all")
    assert explained.returncode == 0, explained.stderr
    assert (
        b"bad__pwn\\x1b]0;owned\\x07\\x1b[2J: hidden \xe2\x80\x94 the gateway's naming rule: "
        b"no control characters in a prompt name (the name)" in explained.stdout
    )
    assert b"bad__plain: visible" in explained.stdout
    as_json = run(config, "explain", "--all", "--json")
    assert b'"name": "bad__pwn\\u001b]0;owned\\u0007\\u001b[2J"' in as_json.stdout


def test_list_shows_the_other_prompts_words_escaped(config: Path) -> None:
    listed = run(config, "list")
    assert listed.returncode == 0, listed.stderr
    assert b"bad__plain  topic\\x1b[8m?  looks fine\\x9b2J\\x1b[31m red" in listed.stdout
    assert b"pwn" not in listed.stdout
    as_json = run(config, "list", "--json")
    assert b'"description": "looks fine\\u009b2J\\u001b[31m red"' in as_json.stdout
    assert b'"title": "Plain\\u202eevil"' in as_json.stdout


def test_check_names_the_refused_prompt_and_the_server_escaped(config: Path) -> None:
    checked = run(config, "check")
    assert checked.returncode == 0, checked.stderr
    assert b"hostile\\x07server" in checked.stdout
    assert (
        b"refused: bad__pwn\\x1b]0;owned\\x07\\x1b[2J of upstream bad is hidden: its name holds control characters"
        in checked.stdout
    )
    assert b"prompt_name_refused" in checked.stderr


def test_render_shows_a_message_escaped_line_by_line(config: Path) -> None:
    rendered = run(config, "render", "bad__plain")
    assert rendered.returncode == 0, rendered.stderr
    assert b"line one\n\\x1b]0;owned\\x07line two" in rendered.stdout
    assert run(config, "render", "bad__plain", "--json").returncode == 0
    refused = run(config, "render", "bad__pwn\x1b]0;owned\x07\x1b[2J")
    assert refused.returncode == 1
    assert b"bad__pwn\\x1b]0;owned\\x07\\x1b[2J" in refused.stderr
