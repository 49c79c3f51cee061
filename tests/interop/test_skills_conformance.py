"""The conformance suite's Skills extension scenarios (SEP-2640) against the gateway serving a team's
skill folders: every check of each must pass, at 2026-07-28 (where the suite runs extension scenarios)
and, forced, at 2025-11-25 over the handshake."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.integration.helpers import gateway_params, running_gateway, write_config
from tests.integration.test_skills import call
from tests.interop.conftest import MODULES
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


SCALARS = """---
name: scalars
description: Front matter whose scalars YAML 1.1 and 1.2 read apart
enabled: yes
answer: No
mode: 010
octal: 0o17
hex: 0x1F
big: 1e3
time: 1:20
grouped: 1_000
flags: 0b11
version: 1.10
released: 2024-01-02
nothing: ~
---
Body
"""


async def test_front_matter_is_what_the_reference_hosts_yaml_reads(node: str, tmp_path: Path) -> None:
    """The entry's front matter must say what the file says to the hosts that compare the two: the
    extension's reference implementation (@olaservo/ext-skills) reads SKILL.md with the `yaml` package
    (YAML 1.2), where PyYAML read YAML 1.1 (``yes`` was true, ``010`` eight, ``1:20`` eighty; a tester)."""
    folder = tmp_path / "repo" / ".claude" / "skills" / "scalars"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(SCALARS)
    upstream = {"namespace": "team", "transport": "files", "path": str(tmp_path / "repo"), "skills_as": "skills"}
    config = write_config(tmp_path / "c.toml", [upstream])
    reader = MODULES.parent / "@olaservo" / "ext-skills"  # its own `yaml`, wherever npm put it
    script = "const fs=require('fs');const y=require('yaml');"
    script += "process.stdout.write(JSON.stringify(y.parse(fs.readFileSync(0,'utf8').split('---')[1])))"
    read = await anyio.run_process([node, "-e", script], input=SCALARS.encode(), cwd=reader)
    hosts = json.loads(read.stdout)
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        served = (await call(client, "skills/list", {}))["skills"][0]["frontmatter"]
    assert served == hosts
    assert (served["enabled"], served["mode"], served["time"], served["big"]) == ("yes", 10, "1:20", 1000)
