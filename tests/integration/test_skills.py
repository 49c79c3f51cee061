"""A team's skill folders served as Agent Skills (SEP-2640) to the official SDK client, which has no
skills API: the extension's methods are sent as raw requests. Every entry is checked against the spec's
rules, every file read back against its digest and size, and an edit changes the digest it announces."""

from __future__ import annotations

import base64
import hashlib
import json
import signal
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp.types as t
import pytest
from mcp import Client, MCPError
from pydantic import TypeAdapter

from gateway.protocol.skills import EXTENSION_ID, Skill
from tests.integration.helpers import (
    ROOT,
    ListChangedWatcher,
    gateway_command,
    gateway_params,
    running_gateway,
    sdk_upstream,
    write_config,
)
from tests.integration.test_operator_page import chromium

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
RESULT = TypeAdapter(dict[str, Any])
PDF = """---
name: pdf-processing
description: Extract, fill, and assemble PDF documents
metadata:
  version: "2.1.0"
---
# PDF processing

Choose the matching template from `templates/`.
"""


async def call(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request the SDK has no method for, sent as it is."""
    return await client.session.send_request(t.Request[dict[str, Any], str](method=method, params=params), RESULT)


def skills_folder(root: Path) -> Path:
    pdf = root / ".claude" / "skills" / "pdf-processing"
    (pdf / "templates").mkdir(parents=True)
    (pdf / "SKILL.md").write_text(PDF)
    (pdf / "templates" / "invoice.md").write_text("Invoice template\n")
    (pdf / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff")
    (root / ".claude" / "commands").mkdir()
    (root / ".claude" / "commands" / "fix.md").write_text("Fix $ARGUMENTS")
    return root


def files_upstream(root: Path, skills_as: str) -> dict[str, Any]:
    return {"namespace": "team", "transport": "files", "path": str(root), "skills_as": skills_as}


async def read_back(client: Client, uri: str) -> bytes:
    contents = (await call(client, "resources/read", {"uri": uri}))["contents"]
    assert len(contents) == 1
    assert contents[0]["uri"] == uri
    if "text" in contents[0]:
        return str(contents[0]["text"]).encode()
    return base64.b64decode(contents[0]["blob"])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_skills_listed_got_and_read_back_against_their_digests(tmp_path: Path, mode: str) -> None:
    root = skills_folder(tmp_path / "repo")
    config = write_config(tmp_path / "c.toml", [files_upstream(root, "both")])
    changes = ListChangedWatcher(t.ResourceListChangedNotification)  # a skill's file is no prompt, even "both"
    async with Client(gateway_params(config), mode=mode, cache=None, message_handler=changes) as client:
        capabilities = client.server_capabilities
        assert capabilities.extensions == {EXTENSION_ID: {"directoryRead": True}}
        assert capabilities.resources is not None  # the spec: a server declaring the extension declares resources
        listing = await call(client, "skills/list", {})
        assert [s["uri"] for s in listing["skills"]] == ["skill://team/pdf-processing/SKILL.md"]
        if mode == "auto":  # 2026-07-28: a CacheableResult
            assert listing["ttlMs"] >= 0
            assert listing["cacheScope"] == "public"
        entry = listing["skills"][0]
        Skill.model_validate(entry)
        assert entry["frontmatter"] == {
            "name": "pdf-processing",
            "description": "Extract, fill, and assemble PDF documents",
            "metadata": {"version": "2.1.0"},
        }
        for file in entry["resources"]:
            data = await read_back(client, file["uri"])
            assert len(data) == file["size"]
            assert "sha256:" + hashlib.sha256(data).hexdigest() == file["digest"]
        got = await call(client, "skills/get", {"uri": entry["uri"]})
        assert got["skill"] == entry
        sizes = {file["uri"]: file["size"] for file in entry["resources"]}
        listed = (await call(client, "resources/list", {}))["resources"]
        assert {r["uri"]: r.get("size") for r in listed} == sizes  # SKILL.md's too (it had none)
        directory = await call(client, "resources/directory/read", {"uri": "skill://team/pdf-processing"})
        assert {(r["name"], r["mimeType"]) for r in directory["resources"]} == {
            ("pdf-processing", "text/markdown"),
            ("logo.png", "image/png"),
            ("templates", "inode/directory"),
        }
        for unknown in ("skill://team/pdf-processing/README.md", "skill://other/pdf-processing/SKILL.md"):
            with pytest.raises(MCPError) as refused:
                await call(client, "skills/get", {"uri": unknown})
            assert refused.value.error.code == -32602
            assert refused.value.error.message == f"No skill is served at {unknown}"
        with pytest.raises(MCPError) as refused:
            await call(client, "resources/directory/read", {"uri": entry["uri"]})
        assert refused.value.error.code == -32602
        assert "is not a directory resource" in refused.value.error.message
        names = sorted(p.name for p in (await client.list_prompts()).prompts)
        assert names == ["team__fix", "team__pdf-processing"]  # "both": still a prompt too
        if mode != "legacy":
            return  # a modern client hears of changes through subscriptions/listen: the edit is checked once

        await anyio.Path(root / ".claude/skills/pdf-processing/templates/invoice.md").write_text("Invoice v2\n")
        await changes.wait()
        changed = (await call(client, "skills/get", {"uri": entry["uri"]}))["skill"]
        invoice = "skill://team/pdf-processing/templates/invoice.md"
        before = next(r for r in entry["resources"] if r["uri"] == invoice)
        after = next(r for r in changed["resources"] if r["uri"] == invoice)
        assert after["digest"] != before["digest"]
        assert after["digest"] == "sha256:" + hashlib.sha256(b"Invoice v2\n").hexdigest()
        assert await read_back(client, invoice) == b"Invoice v2\n"


async def test_skills_only_and_a_gateway_without_skills_shows_nothing_new(tmp_path: Path) -> None:
    root = skills_folder(tmp_path / "repo")
    only = write_config(tmp_path / "only.toml", [files_upstream(root, "skills")])
    async with Client(gateway_params(only), mode="legacy", cache=None) as client:
        assert [p.name for p in (await client.list_prompts()).prompts] == ["team__fix"]
        assert len((await call(client, "skills/list", {}))["skills"]) == 1
    plain = write_config(tmp_path / "plain.toml", [files_upstream(root, "prompts")])
    async with Client(gateway_params(plain), mode="legacy", cache=None) as client:
        assert client.server_capabilities.extensions is None
        assert client.server_capabilities.resources is None
        for method in ("skills/list", "resources/list", "resources/read"):
            with pytest.raises(MCPError) as refused:
                await call(client, method, {"uri": "skill://team/pdf-processing/SKILL.md"})
            assert refused.value.error.code == -32601, method


async def test_skill_reads_are_audited_and_limited_per_method_over_http(tmp_path: Path) -> None:
    """Each skill read is an audit event naming its URI and upstream (an unknown one with why, params
    that do not validate as such), and ``[limits] methods`` limits each skill method by its name."""
    root = skills_folder(tmp_path / "repo")
    config = write_config(
        tmp_path / "g.toml",
        [files_upstream(root, "skills")],
        server={"transport": "http", "port": 0},
        limits={"methods": {"resources/read": "2/minute"}},
    )
    skill_md = "skill://team/pdf-processing/SKILL.md"
    missing = "skill://team/pdf-processing/README.md"
    async with running_gateway(config) as gateway:
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
            await call(client, "skills/get", {"uri": skill_md})
            await call(client, "resources/directory/read", {"uri": "skill://team/pdf-processing"})
            await call(client, "resources/read", {"uri": skill_md})
            with pytest.raises(MCPError) as unknown:
                await call(client, "resources/read", {"uri": missing})
            assert unknown.value.error.code == -32602
            with pytest.raises(MCPError) as limited:
                await call(client, "resources/read", {"uri": skill_md})
            assert limited.value.error.code == -32029
            assert limited.value.error.data["limit"] == "resources/read"
            await call(client, "skills/list", {})  # another method: not limited by resources/read's rate
            with pytest.raises(MCPError) as invalid:
                await call(client, "skills/get", {"uri": 7})
            assert invalid.value.error.code == -32602

        got = await gateway.wait_for_event("audit", method="skills/get", outcome="ok")
        assert (got["skill"], got["upstream"], got["prompt"]) == (skill_md, "team", None)
        assert got["who"] == {"kind": "anonymous", "name": "http"}
        directory = await gateway.wait_for_event("audit", method="resources/directory/read")
        assert (directory["skill"], directory["outcome"]) == ("skill://team/pdf-processing", "ok")
        read = await gateway.wait_for_event("audit", method="resources/read", outcome="ok")
        assert read["skill"] == skill_md
        refused = await gateway.wait_for_event("audit", method="resources/read", outcome="error")
        assert (refused["skill"], refused["code"]) == (missing, -32602)
        assert refused["reason"] == f"Resource not found: {missing}"
        over = await gateway.wait_for_event("audit", method="resources/read", outcome="rate_limited")
        assert (over["skill"], over["limit"]) == (skill_md, "resources/read")
        bad = await gateway.wait_for_event("audit", method="skills/get", outcome="error")
        assert bad["code"] == -32602
        assert "uri" in bad["reason"]


def relaying(namespace: str, **env: str) -> dict[str, Any]:
    return sdk_upstream(namespace, "skills_upstream", relay_skills=True, env=env)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_two_upstreams_skills_relayed_under_their_namespaces_and_checked(tmp_path: Path, mode: str) -> None:
    """Two SDK upstreams serving the same skills at the same URIs: each is relayed under its namespace,
    every request reaches the right one with its own URI (the upstream checks each against the spec), and
    every file read back is the manifest's bytes. With a gateway's own skill folder beside them."""
    root = skills_folder(tmp_path / "repo")
    config = write_config(tmp_path / "c.toml", [relaying("a"), relaying("b"), files_upstream(root, "skills")])
    async with Client(gateway_params(config), mode=mode, cache=None) as client:
        assert client.server_capabilities.extensions == {EXTENSION_ID: {"directoryRead": True}}
        listing = await call(client, "skills/list", {})
        uris = [s["uri"] for s in listing["skills"]]
        assert uris == [
            "skill://a/acme/billing/refunds/SKILL.md",
            "skill://a/pdf-processing/SKILL.md",
            "skill://b/acme/billing/refunds/SKILL.md",
            "skill://b/pdf-processing/SKILL.md",
            "skill://team/pdf-processing/SKILL.md",
        ]
        for entry in listing["skills"]:
            Skill.model_validate(entry)
            for file in entry["resources"]:
                data = await read_back(client, file["uri"])
                assert (len(data), "sha256:" + hashlib.sha256(data).hexdigest()) == (file["size"], file["digest"])
        refunds = next(s for s in listing["skills"] if s["uri"] == "skill://b/acme/billing/refunds/SKILL.md")
        assert refunds["frontmatter"] == {"name": "refunds", "description": "How refunds are handled", "license": "MIT"}
        assert (await call(client, "skills/get", {"uri": refunds["uri"]}))["skill"] == refunds
        directory = await call(client, "resources/directory/read", {"uri": "skill://a/pdf-processing"})
        assert {(r["uri"], r["mimeType"]) for r in directory["resources"]} == {
            ("skill://a/pdf-processing/SKILL.md", "text/markdown"),
            ("skill://a/pdf-processing/logo.png", "image/png"),
            ("skill://a/pdf-processing/templates", "inode/directory"),
        }
        with pytest.raises(MCPError) as unknown:
            await call(client, "skills/get", {"uri": "skill://a/nothing/SKILL.md"})
        assert unknown.value.error.code == -32602


async def test_a_relayed_file_whose_bytes_do_not_match_its_manifest_is_refused(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml",
        [relaying("good"), relaying("bad", SKILLS_TAMPERED="1")],
        server={"transport": "http", "port": 0, "admin": {"enabled": True}},  # the page: loopback callers only
    )
    async with running_gateway(config) as gateway, httpx.AsyncClient(base_url=gateway.url) as http:
        async with http.stream("GET", "/admin/events", timeout=30) as events:
            lines = events.aiter_lines()
            assert (await anext(lines)).startswith("event: upstreams")  # open before the read: it is pushed
            async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
                invoice = "skill://bad/pdf-processing/templates/invoice.md"
                with pytest.raises(MCPError) as refused:
                    await call(client, "resources/read", {"uri": invoice})
                assert refused.value.error.code == -32603
                assert "do not match its manifest" in refused.value.error.message
                assert "changed behind" not in refused.value.error.message
                good = "skill://good/pdf-processing/templates/invoice.md"
                assert await read_back(client, good) == b"Invoice template\n"
                assert await read_back(client, "skill://bad/pdf-processing/SKILL.md")  # only that file is refused
            pushed: list[dict[str, Any]] = []
            with anyio.fail_after(60):  # what the open page is sent; its script shows a skill where a prompt goes
                async for line in lines:
                    if line == "event: audit":
                        pushed = json.loads((await anext(lines)).removeprefix("data: "))
                    if any(e["skill"] == invoice for e in pushed):
                        break
        reason = "Upstream 'bad' served bytes that do not match the skill's manifest"
        assert {"skill": invoice, "prompt": None, "outcome": "error", "code": -32603, "reason": reason}.items() <= next(
            e for e in pushed if e["skill"] == invoice
        ).items()
        page = (await http.get("/admin")).text  # what a page loaded now is sent
        table = page.split('<table id="audit">', 1)[1].split("</table>", 1)[0]
        row = next(row for row in table.split("<tr>") if invoice in row)
        assert f"<td>{invoice}</td>" in row
        assert "<td>error -32603</td>" in row
        assert "served bytes that do not match the skill&#39;s manifest" in row
        logged = await gateway.wait_for_event("skill_digest_mismatch")
        assert (logged["upstream"], logged["skill_file"]) == ("bad", invoice)
        audited = await gateway.wait_for_event("audit", method="resources/read", outcome="error")
        assert (audited["skill"], audited["upstream"], audited["code"]) == (invoice, "bad", -32603)
        assert audited["reason"] == reason


@pytest.mark.services
async def test_the_open_page_shows_a_skill_read_where_a_prompt_goes(tmp_path: Path) -> None:
    """The page's script draws a pushed skill read with its skill URI in the prompt column."""
    executable = chromium()
    from playwright.async_api import async_playwright, expect

    server = {"transport": "http", "port": 0, "admin": {"enabled": True}}
    config = write_config(tmp_path / "c.toml", [relaying("bad", SKILLS_TAMPERED="1")], server=server)
    async with running_gateway(config) as gateway, async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        page = await browser.new_page()
        await page.goto(f"{gateway.url}/admin")
        await expect(page.locator("tr[data-upstream=bad] td.state")).to_have_text("ready", timeout=30_000)
        invoice = "skill://bad/pdf-processing/templates/invoice.md"
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
            with pytest.raises(MCPError):
                await call(client, "resources/read", {"uri": invoice})
        row = page.locator("#audit tbody tr", has_text="error -32603")  # pushed to the open page
        await expect(row.locator("td").nth(3)).to_have_text(invoice, timeout=30_000)
        await expect(row).to_contain_text("served bytes that do not match the skill's manifest")
        await browser.close()


async def test_an_edited_skill_file_is_announced_as_a_resource_list_change(tmp_path: Path) -> None:
    """Skill files are resources: a client that lists them hears ``resources/list_changed`` when one is
    edited, and no ``prompts/list_changed`` (the prompts did not change: it used to be sent too, and every
    client re-listed its prompts for each skill file edited); an edited command is a prompt list's change."""
    root = skills_folder(tmp_path / "repo")
    config = write_config(tmp_path / "c.toml", [files_upstream(root, "skills")])
    resources = ListChangedWatcher(t.ResourceListChangedNotification)
    heard: list[str] = []

    async def handler(message: object) -> None:
        heard.append(type(message).__name__)
        await resources(message)

    async with Client(gateway_params(config), mode="legacy", cache=None, message_handler=handler) as client:
        assert client.server_capabilities.resources is not None
        assert client.server_capabilities.resources.list_changed is True
        await call(client, "skills/list", {})
        await anyio.Path(root / ".claude/skills/pdf-processing/templates/invoice.md").write_text("Invoice v3\n")
        with anyio.fail_after(60):  # the write may be seen half done (truncated, then written): each is announced
            await resources.wait()
            while await read_back(client, "skill://team/pdf-processing/templates/invoice.md") != b"Invoice v3\n":
                await resources.wait()
        # (a fan-out's prompts/list_changed is written before its resources/list_changed: it would be here)
        assert "PromptListChangedNotification" not in heard, heard
        prompts = ListChangedWatcher()
        async with Client(gateway_params(config), mode="legacy", cache=None, message_handler=prompts) as other:
            await other.list_prompts()
            await anyio.Path(root / ".claude/commands/fix.md").write_text("Fix $ARGUMENTS now")
            await prompts.wait(60)


async def test_the_operator_pages_explain_form_explains_skills_as_the_command_does(tmp_path: Path) -> None:
    """Found by a tester: the form answered 404 'no upstream lists a prompt named ...' for a skill's URI
    or policy name, which ``prompt-gateway explain`` explains."""
    root = skills_folder(tmp_path / "repo")
    admin = "operator-token-0123456789"
    config = write_config(
        tmp_path / "g.toml",
        [files_upstream(root, "skills")],
        server={"transport": "http", "port": 0, "admin": {"enabled": True, "token": admin}},
        policy={"deny": ["team__pdf-processing"]},
    )
    async with running_gateway(config) as gateway, httpx.AsyncClient(base_url=gateway.url) as http:
        for name in ("skill://team/pdf-processing/SKILL.md", "team__pdf-processing"):
            page = await http.get("/admin/explain", params={"name": name}, headers={"Authorization": f"Bearer {admin}"})
            assert page.status_code == 200, page.text
            cli = await anyio.run_process([*gateway_command(config, "explain"), name], cwd=ROOT, check=False)
            assert page.text.strip() == cli.stdout.decode().strip()
            assert "hides it" in page.text


async def test_removing_the_last_skills_upstream_tells_clients_their_skills_changed(tmp_path: Path) -> None:
    """A reviewer: with no skills left to serve, a reload that removed their folder sent no
    ``resources/list_changed`` (whether to send it was asked of what is served now), and clients kept
    listing skills that were gone. A session told of resources at its start is told of their change."""
    root = skills_folder(tmp_path / "repo")
    http = {"transport": "http", "port": 0, "audit": {}}
    config = write_config(
        tmp_path / "c.toml", [files_upstream(root, "skills"), sdk_upstream("dyn", "dynamic")], server=http
    )
    resources = ListChangedWatcher(t.ResourceListChangedNotification)
    async with (
        running_gateway(config) as gateway,
        Client(f"{gateway.url}/mcp", mode="legacy", cache=None, message_handler=resources) as client,
    ):
        assert [s["uri"] for s in (await call(client, "skills/list", {}))["skills"]] == [
            "skill://team/pdf-processing/SKILL.md"
        ]
        write_config(config, [sdk_upstream("dyn", "dynamic")], server=http)
        gateway.process.send_signal(signal.SIGHUP)
        await gateway.wait_for_event("config_reloaded")
        await resources.wait(30)
        # A tester: the session was told of resources and skills at its start, and they then answered
        # -32601. What a session was told holds for its life: it lists none and finds none.
        assert (await call(client, "skills/list", {}))["skills"] == []
        assert (await call(client, "resources/list", {}))["resources"] == []
        assert (await call(client, "resources/templates/list", {}))["resourceTemplates"] == []
        with pytest.raises(MCPError, match="Resource not found") as gone:
            await call(client, "resources/read", {"uri": "skill://team/pdf-processing/SKILL.md"})
        assert gone.value.error.code == -32602
        read = await gateway.wait_for_event("audit", method="resources/read")  # a reviewer: it went unaudited
        assert (read["outcome"], read["code"]) == ("error", -32602)
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as later:  # never told: unknown
            with pytest.raises(MCPError, match="skills/list") as unknown:
                await call(later, "skills/list", {})
            assert unknown.value.error.code == -32601
