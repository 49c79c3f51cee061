"""The README and docs/ are part of the product: the config reference matches the models, and every
command shown runs (or says why it cannot here)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from gateway.config import (
    AdminSettings,
    ArgumentOverride,
    AuditSettings,
    AuthSettings,
    ClaimMatch,
    ClusterSettings,
    FilesUpstream,
    GatewaySettings,
    HttpUpstream,
    IconSettings,
    Introspection,
    IssuerSettings,
    LimitsSettings,
    PolicyRules,
    PromptOverride,
    ServerSettings,
    StdioUpstream,
    TelemetrySettings,
    TokenSettings,
    UpstreamOAuth,
    ViewSettings,
)

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README = "\n".join(path.read_text() for path in DOCS)
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
KEY = re.compile(r"^\s*#?\s*([a-z_]+)\s*=", re.MULTILINE)
TABLE = re.compile(r"^\s*#?\s*\[\[?(?:[a-z_]+\.)*([a-z_]+)\]\]?", re.MULTILINE)
MODELS: tuple[type[BaseModel], ...] = (
    GatewaySettings,
    ServerSettings,
    TokenSettings,
    StdioUpstream,
    HttpUpstream,
    PolicyRules,
    AuthSettings,
    IssuerSettings,
    ViewSettings,
    ClaimMatch,
    AuditSettings,
    UpstreamOAuth,
    Introspection,
    FilesUpstream,
    PromptOverride,
    ArgumentOverride,
    IconSettings,
    ClusterSettings,
    TelemetrySettings,
    LimitsSettings,
    AdminSettings,
)

# Commands the README shows that a test cannot run, and why.
NOT_RUN_HERE = {
    "pip install -e '.[test]' && pytest": "the test command itself: .ci/run runs exactly this line",
    "docker build": "needs root and minutes: .ci/run builds the Dockerfile with podman (docker/check-image.sh)",
    "docker run": "needs root and minutes: docker/check-image.sh, from .ci/run, runs both images with podman",
    "pip install -e '.[bench]' && python -m bench": "a full run takes minutes; .ci/run runs python -m bench --quick",
    "pip install '.[telemetry]'": "the test extra requires it; tests/integration/test_telemetry.py traces with it",
    "pipx install .": "builds the same package as pip install ., which the quick-start test runs; pipx is not here",
    "prompt-gateway health": "needs a running gateway: tests/integration/test_cli.py starts one and runs it",
}


def blocks(language: str, text: str = README) -> list[str]:
    return [body for lang, body in BLOCK.findall(text) if lang == language]


def test_the_config_reference_documents_every_key_and_only_real_keys() -> None:
    documented = {key for body in blocks("toml") for key in KEY.findall(body) + TABLE.findall(body)}
    documented -= {"gateway", "server", "upstreams", "cluster", "telemetry", "limits"}  # sections of Config itself
    named = {m for body in blocks("toml") for m in re.findall(r"(?:overrides|arguments)\.([A-Za-z0-9_-]+)", body)}
    documented -= named - {"arguments", "icons"}  # tables named by the user (a prompt, an argument of it)
    fields = {name for model in MODELS for name in model.model_fields}
    assert fields - documented == set(), "keys missing from docs/configuration.md"
    assert documented - fields == set(), "the docs document keys the config does not have"


def test_every_inspector_command_pins_the_version_the_interop_tests_run() -> None:
    """Unpinned, ``npx`` on Node 20 ran Inspector 0.15, where the README's command line means something
    else, and without ``-y`` it asked first. tests/interop runs the pinned commands themselves."""
    inspector = "@modelcontextprotocol/inspector"
    pinned = json.loads((ROOT / "interop" / "package.json").read_text())["devDependencies"][inspector]
    commands = re.findall(r"`(npx [^`]*" + re.escape(inspector) + "[^`]*)`", " ".join(README.split()))
    assert len(commands) >= 2
    for command in commands:
        assert command.startswith(f"npx -y {inspector}@{pinned} "), command


def shell_commands() -> list[str]:
    """One per command: a command continued over lines with a backslash is one command."""
    bodies = [re.sub(r"\\\n\s*", " ", body) for body in blocks("sh")]
    return [line.strip() for body in bodies for line in body.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_readme_python_client_runs_as_shown() -> None:
    """The README's SDK snippet, verbatim, from the repository root (where the example config is), with
    ``prompt-gateway`` found on the PATH as a user's install puts it there."""
    (snippet,) = blocks("python", (ROOT / "README.md").read_text())  # (docs/authentication.md's: test_identity.py)
    bin_dir = str(Path(sys.executable).parent)
    result = subprocess.run(
        [sys.executable, "-c", snippet], capture_output=True, text=True, timeout=120, cwd=ROOT,
        stdin=subprocess.DEVNULL, check=False, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "writing__summarize - " in result.stdout
    assert "eng__internal_debug_dump" not in result.stdout  # the example's policy holds for it too
    assert "Summarize the following text" in result.stdout
    assert "A gateway serves many prompt servers." in result.stdout


def test_every_readme_command_is_run_or_has_a_reason() -> None:
    for command in shell_commands():
        runnable = command.startswith("prompt-gateway ") or command.startswith("python3 -m venv .venv && ")
        exempt = any(marker in command for marker in NOT_RUN_HERE)
        assert runnable or exempt, f"the README shows a command no test runs: {command}"


@pytest.mark.parametrize(
    "command",
    [c for c in shell_commands() if c.startswith("prompt-gateway ") and not any(m in c for m in NOT_RUN_HERE)],
)
def test_readme_cli_commands(command: str) -> None:
    binary = Path(sys.executable).parent / "prompt-gateway"
    result = subprocess.run(
        [str(binary), *command.split()[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


@pytest.mark.slow
@pytest.mark.fresh_install
def test_quick_start_works_on_a_fresh_copy(tmp_path: Path) -> None:
    """The README's first command, verbatim, in a fresh copy of the tree (its own venv; stdin closed ends serve)."""
    quick_start = next(c for c in shell_commands() if c.startswith("python3 -m venv .venv && ") and "check" in c)
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout.splitlines()
    for name in files:
        source = ROOT / name
        if source.is_file():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tmp_path / name)
    result = subprocess.run(
        ["bash", "-c", quick_start],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
        # pip's bytecode compilation is a third of the install's CPU and proves nothing here
        env={**os.environ, "PIP_NO_COMPILE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "writing   stdio      ready  3" in result.stdout
    assert "5 prompts visible through the gateway after policy." in result.stdout


def test_the_python_the_readme_names_is_the_oldest_the_code_runs_on() -> None:
    """The README said "Python 3.10 or newer" while the code used ``logging.getLevelNamesMapping`` (3.11):
    on 3.10 every command ended in a traceback. What the README, pyproject.toml and the Dockerfile name
    must agree, and vermin (which knows every standard-library name's first version) must find nothing
    in the package or the bench that needs a newer one."""
    minimum = re.search(r'requires-python = ">=(3\.\d+)"', (ROOT / "pyproject.toml").read_text())
    assert minimum is not None
    version = minimum.group(1)
    assert f"(Python {version} or newer)" in README
    assert f"python3 ({version} or later)" in (ROOT / "Dockerfile").read_text()
    assert f"`python3` ({version} or later)" in (ROOT / "docs" / "operations.md").read_text()
    vermin = shutil.which("vermin", path=str(Path(sys.executable).parent))
    if vermin is None:
        pytest.skip("vermin is not installed: pip install -e '.[test]'")
    checked = subprocess.run(
        [vermin, f"--target={version}-", "--violations", "--no-tips", "--no-parse-comments", "gateway", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout[-3000:]
