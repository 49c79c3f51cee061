"""Real published Claude Code command collections (npm, pinned in ``interop/package.json``), placed as
their READMEs install them and read end to end through the gateway by an SDK client: a plugin
(``selfish-pipeline``: ``.claude-plugin/`` beside ``commands/``) and a project's ``.claude/commands/``
tree with namespaced folders (``@nextsparkjs/ai-workflow``, whose installer copies its ``claude/``
into ``.claude/``). Every command file is served; a value reaches the model unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import mcp.types as t
import pytest
from mcp import Client

from tests.integration.helpers import gateway_command, gateway_params, write_config
from tests.interop.conftest import ROOT

pytestmark = pytest.mark.anyio
PACKAGES = ROOT / "interop" / "node_modules"
PLUGIN = PACKAGES / "selfish-pipeline"
NEXTSPARK = PACKAGES / "@nextsparkjs" / "ai-workflow"
TYPED = "the price is $5 and awk '{print $1}' breaks"


@pytest.fixture
def collections(node: str, tmp_path: Path) -> tuple[Path, Path, int]:
    """The plugin as published, and a project with NextSpark's commands installed; how many files."""
    for package in (PLUGIN, NEXTSPARK):
        if not package.is_dir():
            pytest.fail(f"{package.name} is not installed: npm ci --prefix interop")
    project = tmp_path / "project"
    shutil.copytree(NEXTSPARK / "claude" / "commands", project / ".claude" / "commands")
    files = [*(PLUGIN / "commands").rglob("*.md"), *(project / ".claude").rglob("*.md")]
    offered = [f for f in files if "\nuser-invocable: false" not in f.read_text()]  # Claude Code offers those to no one
    return PLUGIN, project, len(offered)


async def all_prompts(client: Client) -> list[t.Prompt]:
    prompts: list[t.Prompt] = []
    cursor = None
    while True:
        page = await client.list_prompts(cursor=cursor)
        prompts += page.prompts
        if page.next_cursor is None:
            return prompts
        cursor = page.next_cursor


async def test_published_command_collections_are_served_whole(
    collections: tuple[Path, Path, int], tmp_path: Path
) -> None:
    plugin, project, files = collections
    config = write_config(
        tmp_path / "c.toml",
        [
            {"namespace": "selfish", "transport": "files", "path": str(plugin), "watch": False},
            {"namespace": "next", "transport": "files", "path": str(project), "watch": False},
        ],
    )
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        prompts = await all_prompts(client)
        assert len(prompts) == files  # every command file offered to people, none refused
        assert all(p.description for p in prompts)
        assert all(p.arguments for p in prompts)  # each takes what follows the command
        commands = {p.name: p for p in prompts}
        assert "selfish__selfish-architect" in commands  # name: selfish:architect
        assert "selfish__selfish-analyze" not in commands  # user-invocable: false
        for name in ("selfish__selfish-architect", next(n for n in commands if n.startswith("next__"))):
            argument = commands[name].arguments[0].name  # type: ignore[index]
            rendered = await client.get_prompt(name, {argument: TYPED})
            content = rendered.messages[0].content
            assert isinstance(content, t.TextContent)
            assert TYPED in content.text
    check = await anyio.run_process(gateway_command(config, "check"), cwd=ROOT, check=False)
    assert check.returncode == 0, check.stdout.decode()
