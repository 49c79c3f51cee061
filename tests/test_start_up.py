"""A process's start-up (``gateway/start_up.py``): the garbage collector off while an entry point's imports
run, then what they made frozen and the collector on again; and a gateway started so still serves."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import mcp.types as t
import pytest
from mcp import Client

from tests.integration.helpers import demo_upstream, gateway_params, sdk_upstream, write_config

ROOT = Path(__file__).resolve().parents[1]
SERVERS = ROOT / "tests" / "servers"
AFTER_IMPORT = """
import gc, importlib, json, sys
held = []  # collections started once start_up has run (it defines resume() after it disables the collector)
# and before resume() froze anything; not while start_up itself is being compiled, before it runs


def seen(phase, info):
    ran = hasattr(sys.modules.get("gateway.start_up"), "resume")
    if phase == "start" and ran and gc.get_freeze_count() == 0:
        held.append(info["generation"])


gc.callbacks.append(seen)
importlib.import_module(sys.argv[1])
state = {"started": "gateway.start_up" in sys.modules, "held": held, "enabled": gc.isenabled()}
print(json.dumps({**state, "frozen": gc.get_freeze_count()}))
"""


@pytest.mark.parametrize("module", ["gateway.__main__", "gateway.demo.writing", "tests.servers.rich"])
def test_an_entry_point_imports_with_the_collector_off_then_freezes_and_turns_it_on(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", AFTER_IMPORT, module], capture_output=True, text=True, timeout=60, cwd=ROOT, check=True
    )
    state = json.loads(done.stdout)
    assert state["started"] is True
    assert state["held"] == []  # about 120 to 190 in these imports otherwise: one every 700 net allocations
    assert state["enabled"] is True
    assert state["frozen"] > 10_000  # the modules, classes and functions imported: never scanned again


def processes() -> list[Path]:
    """The modules run as a process of their own: the CLI, the demo servers' shared module, the test servers
    (not ``fastmcp_legacy.py``: it runs as a file in a venv of its own, where there is no gateway)."""
    servers = [p for p in sorted(SERVERS.glob("*.py")) if 'if __name__ == "__main__":' in p.read_text()]
    return [
        ROOT / "gateway" / "__main__.py",
        ROOT / "gateway" / "demo" / "server.py",
        *(p for p in servers if p.name != "fastmcp_legacy.py"),
    ]


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    return [n for n in found if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]


def _is_start_up(node: ast.stmt) -> bool:
    return ast.unparse(node) == "from gateway import start_up"


@pytest.mark.parametrize("path", processes(), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_process_resumes_the_collector_right_after_its_imports(path: Path) -> None:
    """At module level, not in ``main()``: a process importing a name from the module gets its collector
    back too (the suite's workers import ``gateway.__main__`` and ``tests.servers.http_serve``)."""
    tree = ast.parse(path.read_text())
    last_import = _imports(tree)[-1]
    follows = tree.body[tree.body.index(last_import) + 1]
    assert ast.unparse(follows) == "start_up.resume()"


@pytest.mark.parametrize(
    "path", [ROOT / "gateway" / "__main__.py", ROOT / "gateway" / "demo" / "server.py", SERVERS / "__init__.py"]
)
def test_start_up_is_imported_before_anything_else(path: Path) -> None:
    assert _is_start_up(_imports(ast.parse(path.read_text()))[0])


def test_the_demo_servers_start_with_their_shared_module() -> None:
    for name in ("writing", "engineering"):
        first = _imports(ast.parse((ROOT / "gateway" / "demo" / f"{name}.py").read_text()))[0]
        assert isinstance(first, ast.ImportFrom), name
        assert first.module == "gateway.demo.server", name


def test_no_other_module_of_the_gateway_imports_start_up() -> None:
    """Importing it turns the collector off: only a process's entry point may."""
    importers = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "gateway").rglob("*.py")
        if any(_is_start_up(node) or "gateway.start_up" in ast.unparse(node) for node in _all_imports(path))
    }
    assert importers == {"gateway/__main__.py", "gateway/demo/server.py"}


def _all_imports(path: Path) -> list[ast.stmt]:
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Import | ast.ImportFrom)]


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_gateway_and_its_upstreams_started_so_serve(tmp_path: Path) -> None:
    """The gateway, a demo server and an SDK test server, each started with its collector held off and
    frozen: the prompts of both are listed and one is rendered through the gateway."""
    config = write_config(
        tmp_path / "gateway.toml", [demo_upstream("writing", "writing"), sdk_upstream("rich", "rich")]
    )
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        names = {prompt.name for prompt in (await client.list_prompts()).prompts}
        assert {"writing__summarize", "writing__translate", "rich__voice", "rich__greet"} <= names
        result = await client.get_prompt("writing__translate", {"text": "hello", "language": "French"})
    assert isinstance(result, t.GetPromptResult)
    text = result.messages[0].content
    assert isinstance(text, t.TextContent)
    assert text.text == "Translate the following text into French:\n\nhello"
