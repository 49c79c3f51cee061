"""Real published Agent Skills collections, installed into a project as their READMEs say, served as
skills (SEP-2640) through the gateway to an SDK client, every file read back and checked against its
manifest and against the bytes on disk:

* ``agent-skills-bundle`` (PyPI, pinned in ``interop/requirements-skills.txt``): ``agent-skills-bundle
  install --all --target claude`` copies its 22 skills into ``.claude/skills/`` (its README runs it with
  uvx, which runs it from a venv of its own, as here);
* ``@nextsparkjs/ai-workflow`` (npm, pinned in ``interop/package.json``): ``node .../scripts/setup.mjs
  claude`` copies its ``claude/`` into ``.claude/``, skills with scripts in folders of their own. Three of
  its skills break the spec (two have no front matter, one names itself otherwise than its folder):
  those are left out, and ``check`` says why.

What the gateway says is compared with what is on disk, read here independently of its reader."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client

from gateway.protocol.skills import Skill
from tests.integration.helpers import gateway_command, gateway_params, write_config
from tests.integration.test_skills import call, read_back
from tests.interop.conftest import ROOT, npm_package

pytestmark = pytest.mark.anyio
REFUSED = {  # the nextspark skills the spec does not allow, and why (as check says it)
    "monorepo-architecture": "does not begin with YAML front matter",
    "session-management": "does not begin with YAML front matter",
    "react-best-practices": "the name 'vercel-react-best-practices' is not its folder's ('react-best-practices')",
}


@pytest.fixture
def projects(skills_bin: Path, node: str, tmp_path: Path) -> tuple[Path, Path]:
    bundle, nextspark = tmp_path / "bundle-project", tmp_path / "nextspark-project"
    bundle.mkdir()
    nextspark.mkdir()
    installer = [str(skills_bin / "agent-skills-bundle"), "install", "--all", "--target", "claude"]
    subprocess.run(installer, cwd=bundle, check=True, capture_output=True, timeout=60)
    setup = npm_package("@nextsparkjs/ai-workflow") / "scripts" / "setup.mjs"
    subprocess.run([node, str(setup), "claude"], cwd=nextspark, check=True, capture_output=True, timeout=60)
    return bundle, nextspark


def on_disk(project: Path) -> dict[str, tuple[dict[str, Any], dict[str, bytes]]]:
    """Every installed skill by folder name: its front matter (PyYAML) and every file beside it that is
    not hidden, by path, as the spec's manifest must list them."""
    skills = {}
    for skill_md in sorted((project / ".claude" / "skills").glob("*/SKILL.md")):
        folder = skill_md.parent
        text = skill_md.read_text()
        front = yaml.safe_load(text.split("---\n", 2)[1]) if text.startswith("---\n") else None
        files = {}
        for directory, subdirectories, names in os.walk(folder):
            subdirectories[:] = [d for d in subdirectories if not d.startswith(".")]
            for name in names:
                if not name.startswith("."):
                    path = Path(directory, name)
                    files[path.relative_to(folder).as_posix()] = path.read_bytes()
        skills[folder.name] = (front, files)
    return skills


async def every_skill(client: Client) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await call(client, "skills/list", {"cursor": cursor} if cursor else {})
        entries += page["skills"]
        cursor = page.get("nextCursor")
        if cursor is None:
            return entries


async def test_published_skill_collections_are_served_and_read_back_whole(
    projects: tuple[Path, Path], tmp_path: Path
) -> None:
    bundle, nextspark = projects
    installed = {"bundle": on_disk(bundle), "next": on_disk(nextspark)}
    assert len(installed["bundle"]) == 22
    assert REFUSED.keys() <= installed["next"].keys()
    config = write_config(
        tmp_path / "c.toml",
        [
            {"namespace": "bundle", "transport": "files", "path": str(bundle), "skills_as": "skills", "watch": False},
            {"namespace": "next", "transport": "files", "path": str(nextspark), "skills_as": "both", "watch": False},
        ],
    )
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        entries = await every_skill(client)
        served = {(e["uri"].split("/")[2], e["uri"].split("/")[3]): e for e in entries}
        expected = {(ns, name) for ns, skills in installed.items() for name in skills if name not in REFUSED}
        assert served.keys() == expected
        for (namespace, name), entry in served.items():
            Skill.model_validate(entry)
            front, files = installed[namespace][name]
            assert entry["frontmatter"] == front  # as written: no field dropped or retyped
            root = f"skill://{namespace}/{name}/"
            manifest = {r["uri"].removeprefix(root): r for r in entry["resources"]}
            assert manifest.keys() == files.keys()  # every file, nested ones (scripts/) too
            for path, data in files.items():
                file = manifest[path]
                assert (file["size"], file["digest"]) == (len(data), "sha256:" + hashlib.sha256(data).hexdigest())
                assert await read_back(client, file["uri"]) == data
            assert (await call(client, "skills/get", {"uri": entry["uri"]}))["skill"] == entry
    check = await anyio.run_process(gateway_command(config, "check"), cwd=ROOT, check=False)
    said = check.stdout.decode()
    assert check.returncode == 1, said  # refused skills are reported, and fail the check
    for name, why in REFUSED.items():
        line = next(line for line in said.splitlines() if f".claude/skills/{name}/SKILL.md" in line)
        assert line.startswith("next: not a skill (still served as a prompt): ")  # skills_as = "both"
        assert why in line
    assert "bundle: broken" not in said
