"""Skills relayed from an upstream built with the Skills extension's own SDK (``@olaservo/ext-skills``, the
TypeScript SDK of modelcontextprotocol/ext-skills, pinned in ``interop/package.json``): the server its
README tells an author to write (``tests/servers/ext_skills_upstream.mjs``), over stdio and Streamable HTTP,
relayed beside a files upstream. Through the gateway, the official Python SDK client (raw requests: it has
no skills API) lists, gets and reads every file back against the upstream's own manifest and the bytes on
disk, at both eras the gateway speaks to clients; the MCP Inspector's ``--verify`` checks the same; and a
file changed in the folder of the HTTP upstream (which rediscovers and announces it) is announced by the
gateway with its new digest."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as t
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, StdioServerParameters

from gateway.catalog.relayed_skills import UNANNOUNCED_S
from gateway.protocol.skills import EXTENSION_ID, Skill
from tests.integration.helpers import ListChangedWatcher, gateway_params, write_config
from tests.integration.test_skills import call, files_upstream, read_back, skills_folder
from tests.integration.test_skills_http import next_resources_change
from tests.interop.conftest import NPM_PACKAGES, ROOT
from tests.interop.test_client_commands import inspector_pinned
from tests.interop.test_skills_inspector import GATEWAY, inspector_verify

pytestmark = pytest.mark.anyio
SDK = "@olaservo/ext-skills"
RELAYED = ("ext", "old", "web", "oldweb")
SERVER = ROOT / "tests" / "servers" / "ext_skills_upstream.mjs"
PDF = """---
name: pdf-processing
description: Extract, fill, and assemble PDF documents
metadata:
  version: "2.1.0"
---
# PDF processing

Pick a form from `templates/forms/`.
"""
REFUNDS = "---\nname: refunds\ndescription: How refunds are handled\nlicense: MIT\n---\nRefund within 30 days.\n"
FILES = {
    "pdf-processing/SKILL.md": PDF.encode(),
    "pdf-processing/templates/forms/invoice.md": b"Invoice template\n",
    "pdf-processing/logo.png": b"\x89PNG\r\n\x1a\n\xff\x00\xfe",
    "acme/billing/refunds/SKILL.md": REFUNDS.encode(),
}


@pytest.fixture(scope="module")
def sdk_pinned() -> str:
    pinned = json.loads((ROOT / "interop" / "package.json").read_text())["devDependencies"][SDK]
    installed = json.loads((NPM_PACKAGES / SDK / "package.json").read_text())
    assert installed["version"] == pinned, "interop/node_modules is not what interop/package.json pins: npm ci"
    return str(pinned)


def sdk_folder(root: Path) -> Path:
    for path, data in FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    return root


def stdio_upstream(node: str, namespace: str, folder: Path) -> dict[str, Any]:
    command = {"command": node, "args": [str(SERVER), str(folder)]}
    return {"namespace": namespace, "transport": "stdio", **command, "relay_skills": True, "timeout_s": 20}


@asynccontextmanager
async def http_upstream(node: str, folder: Path) -> AsyncIterator[tuple[str, BufferedByteReceiveStream]]:
    """The SDK's server over Streamable HTTP: its URL, and its stderr (where it says it rediscovered)."""
    async with await anyio.open_process([node, str(SERVER), str(folder), "--http"]) as process:
        assert process.stdout is not None
        assert process.stderr is not None
        with anyio.fail_after(30):
            url = json.loads(await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 4096))["url"]
        try:
            yield url, BufferedByteReceiveStream(process.stderr)
        finally:
            process.terminate()


async def upstream_manifest(node: str, folder: Path) -> dict[str, dict[str, Any]]:
    """What the SDK's server itself lists, asked directly, by skill URI."""
    params = StdioServerParameters(command=node, args=[str(SERVER), str(folder)])
    async with Client(params, mode="legacy", cache=None) as client:
        return {s["uri"]: s for s in (await call(client, "skills/list", {}))["skills"]}


def relayed(entry: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The upstream's entry as the gateway serves it: its URIs under ``skill://<namespace>/``."""

    def under(uri: str) -> str:
        return uri.replace("skill://", f"skill://{namespace}/", 1)

    resources = [{**r, "uri": under(r["uri"])} for r in entry["resources"]]
    return {**entry, "uri": under(entry["uri"]), "resources": resources}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdks_skills_relayed_over_stdio_and_http(
    node: str, sdk_pinned: str, tmp_path: Path, mode: str
) -> None:
    folder = sdk_folder(tmp_path / "skills")
    manifest = await upstream_manifest(node, folder)
    assert set(manifest) == {"skill://pdf-processing/SKILL.md", "skill://acme/billing/refunds/SKILL.md"}
    async with http_upstream(node, folder) as (url, _):
        web = {"namespace": "web", "transport": "streamable-http", "url": url, "relay_skills": True, "timeout_s": 20}
        upstreams = [
            stdio_upstream(node, "ext", folder),
            {**stdio_upstream(node, "old", folder), "protocol": "legacy"},
            web,
            {**web, "namespace": "oldweb", "protocol": "legacy"},  # the SDK's stateless 2025 fallback
            files_upstream(skills_folder(tmp_path / "repo"), "skills"),
        ]
        config = write_config(tmp_path / "c.toml", upstreams)
        async with Client(gateway_params(config), mode=mode, cache=None) as client:
            assert client.server_capabilities.extensions == {EXTENSION_ID: {"directoryRead": True}}
            listing = await call(client, "skills/list", {})
            if mode == "auto":
                assert listing["ttlMs"] >= 0
            served = {s["uri"]: s for s in listing["skills"]}
            expected = {relayed(e, ns)["uri"]: relayed(e, ns) for ns in RELAYED for e in manifest.values()}
            assert set(served) == {*expected, "skill://team/pdf-processing/SKILL.md"}
            for uri, entry in expected.items():
                Skill.model_validate(served[uri])
                assert served[uri] == entry  # the SDK's frontmatter and manifest, as it listed them
                assert (await call(client, "skills/get", {"uri": uri}))["skill"] == entry
                namespace = uri.split("/")[2]
                for file in entry["resources"]:
                    data = await read_back(client, file["uri"])
                    assert (len(data), "sha256:" + hashlib.sha256(data).hexdigest()) == (file["size"], file["digest"])
                    assert data == (folder / file["uri"].removeprefix(f"skill://{namespace}/")).read_bytes()
            for namespace in RELAYED:
                root = await call(client, "resources/directory/read", {"uri": f"skill://{namespace}/pdf-processing"})
                assert {(r["uri"], r["mimeType"]) for r in root["resources"]} == {
                    (f"skill://{namespace}/pdf-processing/SKILL.md", "text/markdown"),
                    (f"skill://{namespace}/pdf-processing/logo.png", "image/png"),
                    (f"skill://{namespace}/pdf-processing/templates", "inode/directory"),
                }
                forms = f"skill://{namespace}/pdf-processing/templates/forms"
                found = await call(client, "resources/directory/read", {"uri": forms})
                assert [r["uri"] for r in found["resources"]] == [f"{forms}/invoice.md"]
                acme = await call(client, "resources/directory/read", {"uri": f"skill://{namespace}/acme"})
                assert [(r["uri"], r["mimeType"]) for r in acme["resources"]] == [
                    (f"skill://{namespace}/acme/billing", "inode/directory")
                ]


async def test_the_inspector_verifies_the_sdks_skills_through_the_gateway(
    node: str, sdk_pinned: str, tmp_path: Path
) -> None:
    inspector_pinned()
    folder = sdk_folder(tmp_path / "skills")
    team = files_upstream(skills_folder(tmp_path / "repo"), "both")
    config = write_config(tmp_path / "c.toml", [stdio_upstream(node, "ext", folder), team])
    returncode, said, found = await inspector_verify(
        node, tmp_path, "--require-digests", "--", GATEWAY, "serve", "--config", str(config)
    )
    assert returncode == 0, said[-3000:]
    assert set(found) == {
        "skill://team/pdf-processing/SKILL.md",
        "skill://ext/pdf-processing/SKILL.md",
        "skill://ext/acme/billing/refunds/SKILL.md",
    }
    assert all(r["outcome"] == "verified" for r in found.values()), said[-3000:]
    assert sum(len(r["files"]) for r in found.values()) == 3 + 3 + 1
    assert all(f["status"] == "verified" for r in found.values() for f in r["files"])
    assert "no conformance errors" in said


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_file_changed_in_the_upstreams_folder_is_announced_with_its_new_digest(
    node: str, sdk_pinned: str, tmp_path: Path, mode: str
) -> None:
    """The HTTP upstream rediscovers its folder and publishes ``resources/list_changed`` on its listen
    streams; the gateway asks for its skills again and tells its clients, on either era. The stdio upstream
    serving the same folder keeps serving its snapshot, whose bytes still match its manifest."""
    folder = sdk_folder(tmp_path / "skills")
    invoice = folder / "pdf-processing" / "templates" / "forms" / "invoice.md"
    async with http_upstream(node, folder) as (url, upstream_log):
        web = {"namespace": "web", "transport": "streamable-http", "url": url, "relay_skills": True, "timeout_s": 20}
        config = write_config(tmp_path / "c.toml", [stdio_upstream(node, "ext", folder), web])
        changes = ListChangedWatcher(t.ResourceListChangedNotification)
        async with (
            Client(gateway_params(config), mode=mode, cache=None, message_handler=changes) as client,
            AsyncExitStack() as stack,
        ):
            if mode == "auto":  # 2026-07-28: changes come on a listen stream that asks for them
                assert client.protocol_version == "2026-07-28"
                subscription = await stack.enter_async_context(client.listen(resources_list_changed=True))
            skill = "skill://web/pdf-processing/SKILL.md"
            before = (await call(client, "skills/get", {"uri": skill}))["skill"]
            await anyio.Path(invoice).write_bytes(b"Invoice v2, with a longer body\n")
            with anyio.fail_after(20):
                assert (await upstream_log.receive_until(b"\n", 4096)).startswith(b"rediscovered")
            if mode == "auto":
                await next_resources_change(subscription)
            else:
                await changes.wait()
            after = (await call(client, "skills/get", {"uri": skill}))["skill"]
            uri = "skill://web/pdf-processing/templates/forms/invoice.md"
            (old,) = [r for r in before["resources"] if r["uri"] == uri]
            (new,) = [r for r in after["resources"] if r["uri"] == uri]
            assert new["digest"] == "sha256:" + hashlib.sha256(invoice.read_bytes()).hexdigest() != old["digest"]
            assert await read_back(client, uri) == invoice.read_bytes()
            snapshot = "skill://ext/pdf-processing/templates/forms/invoice.md"
            assert await read_back(client, snapshot) == FILES["pdf-processing/templates/forms/invoice.md"]


async def test_a_stateless_2025_upstream_cannot_announce_so_its_skills_are_held_briefly(
    node: str, sdk_pinned: str, tmp_path: Path
) -> None:
    """The SDK's HTTP entry serves 2025 clients statelessly: no session, so no GET stream that a change
    could come on, though it declares ``resources.listChanged``. Relayed with ``protocol = "legacy"``, its
    skills are held as those of a server that announces nothing (``UNANNOUNCED_S``), not for ten minutes:
    a changed file's new digest is listed within seconds (it was not, before)."""
    folder = sdk_folder(tmp_path / "skills")
    invoice = folder / "pdf-processing" / "templates" / "forms" / "invoice.md"
    async with http_upstream(node, folder) as (url, upstream_log):
        old = {"namespace": "old", "transport": "streamable-http", "url": url, "relay_skills": True}
        config = write_config(tmp_path / "c.toml", [{**old, "protocol": "legacy", "timeout_s": 20}])
        async with Client(gateway_params(config), mode="legacy", cache=None) as client:
            skill = "skill://old/pdf-processing/SKILL.md"
            before = (await call(client, "skills/get", {"uri": skill}))["skill"]
            await anyio.Path(invoice).write_bytes(b"Invoice v3\n")
            with anyio.fail_after(20):
                assert (await upstream_log.receive_until(b"\n", 4096)).startswith(b"rediscovered")
            with anyio.fail_after(UNANNOUNCED_S + 15):  # no event to wait for: nothing is announced
                while (after := (await call(client, "skills/get", {"uri": skill}))["skill"]) == before:
                    await anyio.sleep(0.5)
            uri = "skill://old/pdf-processing/templates/forms/invoice.md"
            (new,) = [r for r in after["resources"] if r["uri"] == uri]
            assert new["digest"] == "sha256:" + hashlib.sha256(b"Invoice v3\n").hexdigest()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdks_client_loads_the_gateways_skills(node: str, sdk_pinned: str, tmp_path: Path, mode: str) -> None:
    """The other way round: the SDK's client as a host, against the gateway serving a skill folder and the
    SDK's own server relayed, at both eras. Every read is verified by the SDK (it throws on a mismatch)."""
    folder = sdk_folder(tmp_path / "skills")
    team = files_upstream(skills_folder(tmp_path / "repo"), "both")
    config = write_config(tmp_path / "c.toml", [team, stdio_upstream(node, "ext", folder)])
    client = ROOT / "tests" / "interop" / "ext_skills_client.mjs"
    with anyio.fail_after(60):
        ran = await anyio.run_process(
            [node, str(client), mode, GATEWAY, "serve", "--config", str(config), "--log-level", "warning"], check=False
        )
    assert ran.returncode == 0, ran.stderr.decode()[-3000:]
    summary = json.loads(ran.stdout.decode().splitlines()[-1])
    assert summary["protocolVersion"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert (summary["supports"], summary["directoryRead"]) == (True, True)
    team_skill = summary["skills"]["skill://team/pdf-processing/SKILL.md"]
    assert (
        sorted(team_skill["verified"])
        == sorted(team_skill["walked"])
        == [
            "skill://team/pdf-processing/SKILL.md",
            "skill://team/pdf-processing/logo.png",
            "skill://team/pdf-processing/templates/invoice.md",
        ]
    )
    relayed_skill = summary["skills"]["skill://ext/pdf-processing/SKILL.md"]
    assert (
        sorted(relayed_skill["verified"])
        == sorted(relayed_skill["walked"])
        == [f"skill://ext/{path}" for path in sorted(FILES) if path.startswith("pdf-processing/")]
    )
    relayed_skills = {f"skill://ext/{path}" for path in FILES if path.endswith("/SKILL.md")}
    assert set(summary["skills"]) == {"skill://team/pdf-processing/SKILL.md", *relayed_skills}
    assert "skill://ext/acme/billing/refunds/SKILL.md" in summary["catalog"]
