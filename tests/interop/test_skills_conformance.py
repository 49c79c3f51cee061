"""The conformance suite's Skills extension scenarios (SEP-2640) against the gateway serving a team's
skill folders: every check of each must pass, at 2026-07-28 (where the suite runs extension scenarios)
and, forced, at 2025-11-25 over the handshake."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.helpers import running_gateway, write_config
from tests.interop.test_peers import HTTP, conformance

pytestmark = pytest.mark.anyio
SCENARIOS = ("sep-2640-skills-enumeration", "sep-2640-skills-manifest", "sep-2640-skills-directory")
SKILL = """---
name: pdf-processing
description: Extract, fill, and assemble PDF documents
license: Apache-2.0
---
# PDF processing

Choose the matching template from `templates/`.
"""


def skill_folder(root: Path) -> Path:
    pdf = root / ".claude" / "skills" / "pdf-processing"
    (pdf / "templates" / "regional").mkdir(parents=True)
    (pdf / "SKILL.md").write_text(SKILL)
    (pdf / "templates" / "invoice.md").write_text("Invoice\n")
    (pdf / "templates" / "regional" / "eu-invoice.md").write_text("EU invoice\n")
    return root


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
async def test_conformance_skills_scenarios(node: str, tmp_path: Path, version: str) -> None:
    root = skill_folder(tmp_path / "repo")
    upstream = {"namespace": "team", "transport": "files", "path": str(root), "skills_as": "skills"}
    config = write_config(tmp_path / "c.toml", [upstream], server=HTTP)
    async with running_gateway(config) as gw:
        for scenario in SCENARIOS:
            returncode, output = await conformance(
                node,
                f"{gw.url}/mcp",
                *("--scenario", scenario, "--spec-version", version),
                "--force",  # extension scenarios are off the spec timeline: run them at either revision
            )
            assert returncode == 0, output[-4000:]
            assert re.search(r"Passed: ([1-9]\d*)/\1, 0 failed, 0 warnings", output), output[-4000:]
