"""Why a get failed, in its audit event and on the operator page, over HTTP with the official SDK
client and a gateway that asks for no token: a prompt file's refusals say why (they said nothing), an
upstream's error with code 0 says which upstream answered which code (it was a bare ``error``, and
the upstream's words are never kept), and ``who`` is said to be anonymous (it was null)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, MCPError

from tests.integration.helpers import running_gateway, sdk_upstream, write_config
from tests.integration.test_operator_page import chromium

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.services]

REVIEW = """---
arguments:
  - name: code
    required: true
  - name: language
    values: [python, rust]
---
Review this {{ language }} code: {{ code }}{{ code.format() }}
"""
ANONYMOUS = {"kind": "anonymous", "name": "http"}


def config(tmp_path: Path) -> Path:
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "review.md").write_text(REVIEW)
    return write_config(
        tmp_path / "g.toml",
        [sdk_upstream("f", "arguments"), {"namespace": "team", "transport": "files", "path": str(folder)}],
        server={"transport": "http", "port": 0, "admin": {"enabled": True}},  # the page: loopback callers only
        gateway={"startup_wait_s": 60},  # the first get waits for every upstream, however busy the machine
    )


async def refused(client: Client, name: str, arguments: dict[str, str]) -> int:
    with pytest.raises(MCPError) as error:
        await client.get_prompt(name, arguments)
    return error.value.error.code


async def test_a_failed_get_says_why_and_who_over_http_without_tokens(tmp_path: Path) -> None:
    async with running_gateway(config(tmp_path)) as gateway:
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
            assert await refused(client, "f__today", {"day": "my secret monday"}) == 0
            assert await refused(client, "team__review", {"code": "x", "language": "cobol"}) == -32602
            assert await refused(client, "team__review", {"code": "{my secret}"}) == -32602
            assert await refused(client, "team__review", {"code": "x", "lang": "go"}) == -32602
            await client.get_prompt("team__review", {"code": "x", "language": "rust"})

        async def audited(**fields: Any) -> dict[str, Any]:
            event = await gateway.wait_for_event("audit", **fields)
            assert event["who"] == ANONYMOUS
            assert "secret" not in json.dumps(event)  # an argument's value, quoted by an upstream or a template
            return event

        upstream = await audited(prompt="f__today")
        assert (upstream["outcome"], upstream["code"]) == ("error", 0)
        assert isinstance(upstream["request_id"], int)  # the request's context, as every line served for it
        assert upstream["reason"] == "Upstream 'f' answered with error code 0 (its message is not kept)"
        values = await audited(prompt="team__review", outcome="error")
        assert values["reason"] == "Invalid params: argument 'language' must be one of python, rust"
        template = await audited(prompt="team__review", outcome="error")
        # "{my secret}".format() fails with a KeyError quoting the value: the reason names the error's type
        # alone (it was an UndefinedError for the left-out optional language, which now renders empty)
        assert template["reason"] == "Invalid params: the template did not render: KeyError"
        unknown = await audited(prompt="team__review", outcome="error")
        assert unknown["reason"] == (
            "Invalid params: unknown argument 'lang' for prompt team__review (it takes: code, language)"
        )
        await audited(prompt="team__review", outcome="ok")

        async with httpx.AsyncClient(base_url=gateway.url) as http:
            page = (await http.get("/admin")).text  # what the page is sent (loopback: no token needed)
        table = page.split('<table id="audit">', 1)[1].split("</table>", 1)[0]
        rows = [row for row in table.split("<tr>") if "f__today" in row or "team__review" in row]
        assert len(rows) == 5
        assert "<td>error 0</td>" in rows[-1]  # the oldest last; it showed a bare "error"
        assert "answered with error code 0" in rows[-1]
        assert all("<td>anonymous (no token required)</td>" in row for row in rows)


async def test_the_open_page_shows_a_code_0(tmp_path: Path) -> None:
    executable = chromium()
    from playwright.async_api import async_playwright, expect

    async with running_gateway(config(tmp_path)) as gateway, async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        page = await browser.new_page()
        await page.goto(f"{gateway.url}/admin")
        await expect(page.locator("tr[data-upstream=f] td.state")).to_have_text("ready", timeout=30_000)
        async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
            assert await refused(client, "f__today", {"day": "monday"}) == 0
        row = page.locator("#audit tbody tr", has_text="f__today")  # pushed to the open page, drawn by its script
        await expect(row).to_contain_text("error 0", timeout=30_000)
        await expect(row).to_contain_text("anonymous (no token required)")
        await browser.close()
