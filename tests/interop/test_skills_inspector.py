"""The MCP Inspector's skill verification (its CLI's ``--verify``, the pinned current release) against the
gateway: the team's own skill folder and two relayed upstreams over stdio, as docs/skills.md writes the
command, and over Streamable HTTP; a relayed upstream whose bytes do not match its manifest is refused by
the gateway, which the Inspector reports as a read error, never as bytes that passed."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.integration.helpers import running_gateway, write_config
from tests.integration.test_skills import files_upstream, relaying, skills_folder
from tests.interop.conftest import ROOT
from tests.interop.test_client_commands import INSPECTOR, PACKAGES, environment, inspector_pinned, npx

pytestmark = pytest.mark.anyio
DOCS = " ".join((ROOT / "docs" / "skills.md").read_text().split())
GATEWAY = str(Path(sys.executable).parent / "prompt-gateway")


def reports(stdout: bytes) -> dict[str, dict[str, Any]]:
    """The Inspector's one JSON report per skill, by the skill's URI."""
    lines = [json.loads(line) for line in stdout.decode().splitlines() if line.startswith('{"uri"')]
    return {report["uri"]: report for report in lines}


async def inspector_verify(node: str, tmp_path: Path, *target: str) -> tuple[int, str, dict[str, dict[str, Any]]]:
    """The pinned Inspector's CLI, ``--method skills/list --verify`` against ``target`` (a URL, or ``--``
    and a command): its exit code, everything it said, and its reports by skill URI."""
    cli = PACKAGES / INSPECTOR / "clients" / "cli" / "build" / "index.js"
    with anyio.fail_after(120):
        checked = await anyio.run_process(
            [node, str(cli), "--method", "skills/list", "--verify", *target],
            env=environment(node, tmp_path),
            check=False,
        )
    return checked.returncode, checked.stdout.decode() + checked.stderr.decode(), reports(checked.stdout)


def upstreams(tmp_path: Path, *extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [files_upstream(skills_folder(tmp_path / "repo"), "both"), relaying("a"), relaying("b"), *extra]


async def test_the_inspector_verifies_every_skill_as_docs_skills_md_says(node: str, tmp_path: Path) -> None:
    version, _ = inspector_pinned()
    (command,) = re.findall(rf"`(npx -y {re.escape(INSPECTOR)}@{version} --cli --method skills/list [^`]*)`", DOCS)
    config = write_config(tmp_path / "gateway.toml", upstreams(tmp_path))
    command = command.replace("-- prompt-gateway ", f"-- {GATEWAY} ").replace("gateway.toml", str(config))
    env = {**environment(node, tmp_path), "npm_config_offline": "true", "npm_config_cache": str(tmp_path / "npm")}
    with anyio.fail_after(120):
        checked = await anyio.run_process([npx(), *command.split()[1:]], env=env, cwd=ROOT / "interop", check=False)
    said = checked.stdout.decode() + checked.stderr.decode()
    assert checked.returncode == 0, said[-3000:]
    found = reports(checked.stdout)
    assert set(found) == {
        "skill://team/pdf-processing/SKILL.md",
        "skill://a/pdf-processing/SKILL.md",
        "skill://a/acme/billing/refunds/SKILL.md",
        "skill://b/pdf-processing/SKILL.md",
        "skill://b/acme/billing/refunds/SKILL.md",
    }
    assert all(r["outcome"] == "verified" for r in found.values()), said[-3000:]
    assert all(f["status"] == "verified" for r in found.values() for f in r["files"])
    assert "no conformance errors" in said


async def test_over_http_a_tampered_upstreams_file_is_refused_not_passed_on(node: str, tmp_path: Path) -> None:
    tampered = {**relaying("bad"), "env": {"SKILLS_TAMPERED": "1"}}
    config = write_config(tmp_path / "c.toml", upstreams(tmp_path, tampered), server={"transport": "http", "port": 0})
    async with running_gateway(config) as gateway:
        for namespace in ("team", "a", "b", "bad"):
            await gateway.wait_for_event("upstream_state", upstream=namespace, state="ready")
        returncode, said, found = await inspector_verify(node, tmp_path, f"{gateway.url}/mcp")
    assert returncode == 7, said[-3000:]  # the Inspector's "a skill failed verification"
    assert len(found) == 7, sorted(found)
    failed = {uri for uri, report in found.items() if report["outcome"] != "verified"}
    assert failed == {"skill://bad/pdf-processing/SKILL.md"}
    (bad,) = [f for f in found["skill://bad/pdf-processing/SKILL.md"]["files"] if f["status"] != "verified"]
    assert bad["uri"] == "skill://bad/pdf-processing/templates/invoice.md"
    assert bad["status"] == "read-error"  # no bytes reached it: the gateway refused them
    assert "do not match its manifest" in bad["reason"]
