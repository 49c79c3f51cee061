"""The tree draws the data flow, and the imports keep to it: each stage imports only the stages below it
(client → frontend → identity → catalog → sources → rpc → transports → cluster → observability →
config and protocol), and ``protocol/`` does no I/O. Read from the source with ``ast``: what a module
imports lazily, inside a function, counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "gateway"
STAGES: list[tuple[str, ...]] = [
    # the composition root, and the tools beside the flow
    (
        "app",
        "reloading",
        "serving",
        "serve_command",
        "__main__",
        "testing",
        "demo",
        "importer",
        "explaining",
        "reports",
        "operator_view",
        "failed_start",
        "start_up",
    ),
    ("frontend",),
    ("identity",),
    ("catalog",),
    ("sources",),
    ("rpc", "inbound", "deadlines"),
    ("transports",),
    ("cluster",),
    ("observability",),
    ("config", "protocol", "__init__"),
]
IO_LIBRARIES = {
    "anyio",
    "asyncio",
    "aiohttp",
    "httpx",
    "httpx_sse",
    "starlette",
    "uvicorn",
    "redis",
    "socket",
    "watchfiles",
}


def stage_of(module: str) -> int:
    """The stage of ``gateway.<top>...`` by its first part under ``gateway``."""
    top = module.split(".")[1] if "." in module else "__init__"
    for index, names in enumerate(STAGES):
        if top in names:
            return index
    raise AssertionError(f"{module} belongs to no stage: add it to STAGES")


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found.append((".".join(parts).removesuffix(".__init__"), path))
    return found


def imports_of(path: Path) -> set[str]:
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module)
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
    return imported


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_a_module_imports_only_its_own_stage_and_those_below(module: str, path: Path) -> None:
    own = stage_of(module)
    upward = sorted(
        name for name in imports_of(path) if name.startswith("gateway.") and _is_module(name) and stage_of(name) < own
    )
    assert upward == [], f"{module} imports from a stage above it"


def _is_module(name: str) -> bool:
    """Whether ``name`` is a module or package of the gateway (not a name imported from one)."""
    relative = Path(*name.split(".")[1:])
    return (ROOT / relative).with_suffix(".py").exists() or (ROOT / relative / "__init__.py").exists()


@pytest.mark.parametrize(("module", "path"), [m for m in modules() if ".protocol" in m[0]], ids=lambda v: str(v))
def test_protocol_does_no_io(module: str, path: Path) -> None:
    assert {name.split(".")[0] for name in imports_of(path)} & IO_LIBRARIES == set(), module


def test_every_module_is_small_and_says_where_it_stands() -> None:
    """No module over ~400 lines; each opens with a docstring placing it in the data flow."""
    too_long = {m: n for m, p in modules() if (n := len(p.read_text().splitlines())) > 420}
    assert too_long == {}
    undocumented = [m for m, p in modules() if ast.get_docstring(ast.parse(p.read_text())) is None and p.stat().st_size]
    assert undocumented == []
