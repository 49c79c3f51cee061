"""Relative paths in a config mean the config file's folder, wherever the gateway is started from: a
client starts it from a folder of its own (a tester's config passed ``check`` in its folder, and from
``/`` failed: ``prompts is not a directory``, ``cannot read its env_file .env``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.helpers import ROOT

pytestmark = pytest.mark.slow


def test_path_cwd_env_file_and_a_command_written_as_a_path_are_the_config_folders(tmp_path: Path) -> None:
    folder = tmp_path / "team-gateway"
    (folder / "prompts").mkdir(parents=True)
    (folder / "prompts/hello.md").write_text("Say hello to {{ name }}.\n")
    (folder / ".env").write_text(f"PYTHONPATH={ROOT}\nFROM_ENV_FILE=yes\n")
    server = folder / "sub/bin/env-server"  # a command written as a path is found in its cwd, as a child would
    server.parent.mkdir(parents=True)
    server.write_text(f'#!/bin/sh\nexport STARTED_IN="$(pwd)"\nexec {sys.executable} -m tests.servers.environment\n')
    server.chmod(0o755)
    config = folder / "gateway.toml"
    config.write_text(
        "[[upstreams]]\n"
        'namespace = "team"\ntransport = "files"\npath = "prompts"\n\n'
        "[[upstreams]]\n"
        'namespace = "env"\ncommand = "bin/env-server"\ncwd = "sub"\nenv_file = ".env"\ntimeout_s = 20\n'
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "gateway", *args, "--config", str(config)]
        environ = {**os.environ, "PYTHONPATH": str(ROOT)}
        # started from "/", as a service manager or a client would start it
        return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd="/", env=environ, check=False)

    checked = run("check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    environment = json.loads(run("render", "env__environment").stdout.split("\n", 1)[1])
    assert environment["FROM_ENV_FILE"] == "yes"
    assert environment["STARTED_IN"] == str(folder / "sub")
    assert "Say hello to Ada." in run("render", "team__hello", "--arg", "name=Ada").stdout
