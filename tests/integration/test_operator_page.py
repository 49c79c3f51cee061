"""The operator page in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright,
pointed at that executable (no browser download). Signing in is required; the page shows the upstreams'
states, one killed turns red without a reload, the catalog and the audit events follow a reload and a
request while the page is open, and the explain form answers as ``prompt-gateway explain`` does.
Skipped with the reason where Chromium or Playwright is missing (``.ci/run`` installs both and requires
them)."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import anyio
import httpx
import httpx2
import psutil
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.integration.helpers import ROOT, demo_upstream, running_gateway, sdk_upstream, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.services]

ADMIN = "operator-token-0123456789"
CI = "ci-token-0123456789abcdef"


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    required = os.environ.get("REQUIRE_SERVICES") == "1"
    if path is None:
        if required:
            pytest.fail("chromium is required here (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does it)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        if required:
            pytest.fail("playwright is required here (pip install playwright)")
        pytest.skip("playwright is not installed (pip install playwright; .ci/run does it)")
    return path


def config(tmp_path: Path, *, more: tuple[dict[str, object], ...] = (), deny: tuple[str, ...] = ()) -> Path:
    return write_config(
        tmp_path / "g.toml",
        [demo_upstream("writing", "writing"), sdk_upstream("echo", "meta_echo"), *more],
        server={"transport": "http", "port": 0, "admin": {"enabled": True, "token": ADMIN}},
        tokens=[{"name": "ci", "token": CI, "policy": {"deny": ["writing__proof*"]}}],
        gateway={"restart_initial_s": 60},  # a killed upstream stays down while the page is looked at
        policy={"deny": ["writing__translate", *deny]},
    )


async def test_unauthenticated_access_is_refused(tmp_path: Path) -> None:
    async with running_gateway(config(tmp_path)) as gateway, httpx.AsyncClient(base_url=gateway.url) as http:
        for path in ("/admin", "/admin/events", "/admin/explain?name=x"):
            refused = await http.get(path)
            assert refused.status_code == 401, path
            assert ADMIN not in refused.text
            page_or_words = "text/html" if path == "/admin" else "text/plain"  # a sign-in form only on the page
            assert refused.headers["content-type"].startswith(page_or_words), path
        wrong = await http.post("/admin/sign-in", data={"token": "not-the-token-at-all"})
        assert wrong.status_code == 401
        other_site = await http.post(
            "/admin/sign-in", data={"token": ADMIN}, headers={"Origin": "https://evil.example"}
        )
        assert other_site.status_code == 403
        assert (await http.get("/admin", headers={"Authorization": f"Bearer {CI}"})).status_code == 401  # not ADMIN
        page = await http.get("/admin", headers={"Authorization": f"Bearer {ADMIN}"})
        assert page.status_code == 200
        signed = {"Authorization": f"Bearer {ADMIN}"}
        for query in ("name=%00%ff%fe", "name=" + "x" * 5000, "name=a&caller=token:../../etc", "name=a&caller=view:"):
            odd = await http.get(f"/admin/explain?{query}", headers=signed)  # hostile values: a clear answer
            assert odd.status_code in (400, 404), query
            assert odd.text.startswith(("no upstream lists", "no such caller")), odd.text
        rebound = await http.get("/admin", headers={**signed, "Host": "evil.example"})  # DNS rebinding
        assert rebound.status_code == 421
        assert rebound.text.startswith("Misdirected Request")  # for a person, not a JSON-RPC error
        listening = next(e for e in gateway.events if e.get("event") == "http_listening")
        assert listening["admin"] == f"{gateway.url}/admin"  # the start-up log says where the page is
        signed_in = await http.post("/admin/sign-in", data={"token": ADMIN})
        assert signed_in.status_code == 303
        assert ADMIN not in signed_in.headers["set-cookie"]  # the cookie holds a value derived from it
        assert "HttpOnly" in signed_in.headers["set-cookie"]
        cookie = signed_in.headers["set-cookie"].split(";", 1)[0]
        assert (await http.get("/admin", headers={"Cookie": cookie})).status_code == 200
        signed_out = await http.post("/admin/sign-out", headers={"Cookie": cookie})
        assert signed_out.status_code == 303
        assert 'prompt_gateway_admin="";' in signed_out.headers["set-cookie"]
        assert "Max-Age=0" in signed_out.headers["set-cookie"]
        assert (await http.get("/admin/explain", headers=signed)).status_code == 400
        assert (await http.get("/admin/static/../page.py", headers=signed)).status_code == 404
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert ADMIN not in page.text
        assert CI not in page.text


async def test_a_sign_out_ends_the_event_streams_opened_under_it(tmp_path: Path) -> None:
    """Found by a tester: after the sign-out, a stream the page had open went on pushing audit events
    (who asked for which prompt) to the signed-out browser until it closed the stream itself."""
    async with running_gateway(config(tmp_path)) as gateway, httpx.AsyncClient(base_url=gateway.url) as http:
        signed_in = await http.post("/admin/sign-in", data={"token": ADMIN})
        cookie = signed_in.headers["set-cookie"].split(";", 1)[0]
        async with http.stream("GET", "/admin/events", headers={"Cookie": cookie}, timeout=30) as events:
            lines = events.aiter_lines()
            assert (await anext(lines)).startswith("event: upstreams")
            assert (await http.post("/admin/sign-out", headers={"Cookie": cookie})).status_code == 303
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {CI}"}) as client_http,
                Client(streamable_http_client(f"{gateway.url}/mcp", http_client=client_http), mode="legacy") as client,
            ):
                await client.get_prompt("writing__summarize", {"text": "hi"})  # an audit event to push
            rest = [line async for line in lines]  # the stream ends (a time-out would raise)
        assert not [line for line in rest if line.startswith("event: audit")], rest


async def test_the_page_in_a_browser(tmp_path: Path) -> None:
    executable = chromium()
    from playwright.async_api import async_playwright, expect

    path = config(tmp_path)
    async with running_gateway(path) as gateway, async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        page = await browser.new_page()
        await page.goto(f"{gateway.url}/admin")  # the sign-in form (answered 401)
        problems: list[str] = []
        page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
        await page.fill("input[name=token]", ADMIN)
        await page.click("button[type=submit]")
        await expect(page.locator("tr[data-upstream=writing] td.state")).to_have_text("ready")
        await expect(page.locator("tr[data-upstream=echo] td.state")).to_have_text("ready")
        catalog = page.locator("#catalog")
        await expect(catalog).to_contain_text("writing__summarize")
        proofread = catalog.locator("tr", has_text="writing__proofread")
        await expect(proofread).to_contain_text("nobody")  # the ci token's policy denies it, and tokens are required
        await page.screenshot(path=str(tmp_path / "operator-page.png"), full_page=True)

        # the explain form answers as the command does
        await page.fill("#explain input[name=name]", "writing__proofread")
        await page.select_option("#explain select[name=caller]", "token:ci")
        await page.click("#explain button[type=submit]")
        answered = page.locator("#explained")
        await expect(answered).to_contain_text("hides it")
        command = [sys.executable, "-m", "gateway", "explain", "writing__proofread", "--token", "ci"]
        cli = await anyio.run_process([*command, "--config", str(path)], cwd=ROOT, check=False)
        assert (await answered.inner_text()).strip() == cli.stdout.decode().strip()
        # a request shows in the audit table, and a reload in the catalog, while the page stays open
        summarize = catalog.locator("tr", has_text="writing__summarize")
        await expect(summarize).not_to_contain_text("nobody")
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {CI}"}) as http,
            Client(streamable_http_client(f"{gateway.url}/mcp", http_client=http), mode="legacy") as client,
        ):
            await client.get_prompt("writing__summarize", {"text": "hi"})
        await expect(page.locator("#audit tr", has_text="writing__summarize")).to_contain_text("ok")
        async with httpx.AsyncClient() as stranger:
            await stranger.post(f"{gateway.url}/mcp", json={}, headers={"Authorization": "Bearer wrong"})
        await expect(page.locator("#audit tbody tr").first).to_contain_text("refused 401")
        config(tmp_path, more=(demo_upstream("eng", "engineering"),), deny=("writing__sum*",))
        gateway.process.send_signal(signal.SIGHUP)
        await expect(summarize).to_contain_text("nobody")
        await expect(page.locator("tr[data-upstream=eng] td.state")).to_have_text("ready")  # a row of its own
        await expect(page.locator("tr[data-upstream=writing] td.prompts")).to_have_text("3")  # not 0 after it
        # an upstream killed turns red, without a reload
        child = next(
            p
            for p in psutil.Process(gateway.process.pid).children(recursive=True)
            if "meta_echo" in " ".join(p.cmdline())
        )
        child.kill()
        await expect(page.locator("tr[data-upstream=echo]")).to_have_class("state-backing-off", timeout=20_000)
        await expect(page.locator("tr[data-upstream=writing] td.state")).to_have_text("ready")

        await browser.close()
        assert problems == []  # nothing the Content-Security-Policy refused, no script error


async def test_an_open_page_does_not_hold_up_a_shutdown(tmp_path: Path) -> None:
    """Found by a trial: the page's event stream kept the gateway waiting out uvicorn's grace period."""
    async with running_gateway(config(tmp_path)) as gateway, httpx.AsyncClient(base_url=gateway.url) as http:
        headers = {"Authorization": f"Bearer {ADMIN}"}
        async with http.stream("GET", "/admin/events", headers=headers, timeout=30) as events:
            lines = events.aiter_lines()
            assert (await anext(lines)).startswith("event: upstreams")
            gateway.process.terminate()
            async for _ in lines:  # the stream ends (it is not cut by a time-out: that would raise)
                pass
        assert await gateway.process.wait() == 0
        assert not [e for e in gateway.events if "Exception in ASGI" in str(e.get("event"))]


async def test_without_a_token_the_page_answers_loopback_callers(tmp_path: Path) -> None:
    unset = {"namespace": "remote", "transport": "streamable-http", "url": "${PAGE_TEST_UNSET_URL}"}
    path = write_config(
        tmp_path / "g.toml",
        [demo_upstream("writing", "writing"), unset],
        server={"transport": "http", "port": 0, "admin": {"enabled": True}},
    )
    async with running_gateway(path) as gateway, httpx.AsyncClient(base_url=gateway.url) as http:
        await gateway.wait_for_event("upstream_state", upstream="writing", state="ready")
        shown = await http.get("/admin")  # from 127.0.0.1, Host 127.0.0.1:port
        assert shown.status_code == 200
        assert "writing__summarize" in shown.text
        # an upstream whose URL is an unset variable says so, not the URL it was checked with in its stead
        assert "environment variable PAGE_TEST_UNSET_URL is not set" in shown.text
        assert "unresolved.invalid" not in shown.text
        port = gateway.url.rsplit(":", 1)[1]
        assert (await http.get("/admin", headers={"Host": f"localhost:{port}"})).status_code == 200
        assert (await http.get("/admin", headers={"Host": "evil.example"})).status_code == 421
