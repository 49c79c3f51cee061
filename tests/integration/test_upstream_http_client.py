"""How the gateway reaches remote upstreams: redirects, a real forward proxy, TLS with a private CA and
with a required client certificate. Real servers (the official SDK's, served by uvicorn), a real proxy
(tinyproxy), the gateway as a process."""

from __future__ import annotations

import os
import sys
from contextlib import suppress
from pathlib import Path

import anyio
import anyio.abc
import mcp.types as t
import pytest
from mcp import Client, StdioServerParameters

from tests.integration.certificates import make_certificates
from tests.integration.helpers import ROOT, ListChangedWatcher, gateway_command, http_upstream, write_config
from tests.integration.services import tinyproxy

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def check(config: Path) -> tuple[int, dict[str, str]]:
    """``prompt-gateway check``: its exit code and its table's rows by upstream."""
    with anyio.fail_after(90):
        result = await anyio.run_process(gateway_command(config, "check"), cwd=ROOT, check=False)
    lines = result.stdout.decode().splitlines()
    rows = {line.split()[0]: line for line in lines[1:] if line.strip() and "visible" not in line}
    return result.returncode, rows


def stdio_gateway(config: Path, **env: str) -> StdioServerParameters:
    base = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", str(ROOT))}
    command = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--log-level", "warning"]
    return StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT), env={**base, **env})


async def test_an_upstream_behind_307_and_308_redirects_is_reached(tmp_path: Path) -> None:
    """FastMCP (mcp 1.8 to 1.30) answers POST /mcp with 307 to /mcp/; SDK clients follow it, so must we."""
    async with http_upstream("completing", "streamable-http", env={"SERVE_REDIRECTS": "1"}) as url:
        base = url.removesuffix("/mcp")
        config = write_config(
            tmp_path / "c.toml",
            [
                {"namespace": "slash", "transport": "streamable-http", "url": f"{base}/mcp", "protocol": "legacy"},
                {"namespace": "moved", "transport": "streamable-http", "url": f"{base}/moved"},
            ],
        )
        async with Client(stdio_gateway(config), mode="legacy", cache=None) as client:
            names = sorted(p.name for p in (await client.list_prompts()).prompts)
            assert names == ["moved__internal_notes", "moved__weather", "slash__internal_notes", "slash__weather"]
            for namespace in ("slash", "moved"):
                weather = await client.get_prompt(f"{namespace}__weather", {"country": "FR", "city": "Lyon"})
                assert weather.messages[0].content == t.TextContent(type="text", text="Weather in Lyon, FR (metric)")


async def test_redirects_that_would_drop_the_body_or_leave_the_origin_are_refused(tmp_path: Path) -> None:
    async with http_upstream("completing", "streamable-http", env={"SERVE_REDIRECTS": "1"}) as url:
        base = url.removesuffix("/mcp")
        config = write_config(
            tmp_path / "c.toml",
            [
                {"namespace": "found", "transport": "streamable-http", "url": f"{base}/found", "timeout_s": 10},
                {"namespace": "away", "transport": "streamable-http", "url": f"{base}/elsewhere", "timeout_s": 10},
            ],
        )
        code, rows = await check(config)
    assert code == 1, rows
    assert "answered HTTP 302 to a POST, which would resend it as a GET" in rows["found"]
    assert "redirected to another origin (http://localhost:" in rows["away"]


async def test_upstreams_through_a_real_forward_proxy_configured_or_from_the_environment(tmp_path: Path) -> None:
    """POSTs and the GET stream of a Streamable HTTP upstream through the configured proxy; the legacy SSE
    stream and its POSTs through HTTPS_PROXY/HTTP_PROXY from the environment; proxy = "none" goes around."""
    async with (
        tinyproxy(tmp_path) as proxy,
        http_upstream("dynamic", "streamable-http") as dyn_url,
        http_upstream("completing", "sse") as sse_url,
        http_upstream("completing", "streamable-http") as direct_url,
    ):
        config = write_config(
            tmp_path / "c.toml",
            [
                {"namespace": "dyn", "transport": "streamable-http", "url": dyn_url, "protocol": "legacy"},
                {"namespace": "sse", "transport": "sse", "url": sse_url},
                {"namespace": "direct", "transport": "streamable-http", "url": direct_url, "proxy": "none"},
            ],
        )
        changes = ListChangedWatcher()
        gateway = stdio_gateway(config, HTTP_PROXY=proxy.url)
        async with Client(gateway, mode="legacy", cache=None, message_handler=changes) as client:
            names = {p.name for p in (await client.list_prompts()).prompts}
            assert {"dyn__add", "sse__weather", "direct__weather"} <= names
            weather = await client.get_prompt("sse__weather", {"country": "FR", "city": "Nice"})
            assert weather.messages[0].content == t.TextContent(type="text", text="Weather in Nice, FR (metric)")
            await proxy.wait_for_request(f"GET {dyn_url}")  # the upstream's own stream is open, through the proxy
            await client.get_prompt("dyn__add", {"name": "through_the_proxy"})
            await changes.wait()  # announced on that stream
            assert "dyn__through_the_proxy" in {p.name for p in (await client.list_prompts()).prompts}
    requests = proxy.requests()
    assert f"POST {dyn_url}" in requests
    assert f"GET {sse_url}" in requests
    assert any(r.startswith(f"POST {sse_url.removesuffix('/sse')}/messages/") for r in requests)
    assert not any(direct_url in r for r in requests)


async def test_tls_upstreams_with_a_private_ca_and_a_required_client_certificate(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path / "pki")
    tls = {"SERVE_TLS_DIR": str(certs.directory)}
    mutual = {**tls, "SERVE_CLIENT_CA": str(certs.ca)}
    async with (
        http_upstream("completing", "streamable-http", env=tls, scheme="https") as tls_url,
        http_upstream("completing", "streamable-http", env=mutual, scheme="https") as mtls_url,
    ):
        client_cert = {"client_cert": str(certs.client_cert), "client_key": str(certs.client_key)}
        upstreams = [
            {"namespace": "trusted", "url": tls_url, "ca_file": str(certs.ca)},
            {"namespace": "mutual", "url": mtls_url, "ca_file": str(certs.ca), **client_cert},
            {"namespace": "untrusted", "url": tls_url},
            {"namespace": "nocert", "url": mtls_url, "ca_file": str(certs.ca)},
            {"namespace": "unverified", "url": tls_url, "verify": False},
        ]
        config = write_config(
            tmp_path / "c.toml", [{"transport": "streamable-http", "timeout_s": 10, **u} for u in upstreams]
        )
        async with Client(stdio_gateway(config), mode="legacy", cache=None) as client:
            names = {p.name for p in (await client.list_prompts()).prompts}
            assert {"trusted__weather", "mutual__weather", "unverified__weather"} <= names
            assert not {"untrusted__weather", "nocert__weather"} & names
            weather = await client.get_prompt("mutual__weather", {"country": "FR", "city": "Lyon"})
            assert weather.messages[0].content == t.TextContent(type="text", text="Weather in Lyon, FR (metric)")
        code, rows = await check(config)
    assert code == 1, rows
    assert "CERTIFICATE_VERIFY_FAILED" in rows["untrusted"] or "certificate verify failed" in rows["untrusted"]
    assert rows["trusted"].split()[2] == "ready"
    assert rows["mutual"].split()[2] == "ready"
    assert rows["nocert"].split()[2] != "ready"


async def test_read_timeout_ends_a_request_the_upstream_never_answers(tmp_path: Path) -> None:
    """read_timeout_s bounds a silence shorter than the request's timeout_s."""
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio's, not Django's

        async def accept_and_say_nothing(stream: anyio.abc.SocketStream) -> None:
            async with stream:
                with suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                    while True:
                        await stream.receive()

        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, accept_and_say_nothing)
            silent = {"transport": "streamable-http", "url": f"http://127.0.0.1:{port}/mcp", "protocol": "legacy"}
            config = write_config(
                tmp_path / "c.toml", [{"namespace": "silent", **silent, "timeout_s": 60, "read_timeout_s": 0.5}]
            )
            code, rows = await check(config)
            tg.cancel_scope.cancel()
    assert code == 1
    assert "SocketTimeoutError" in rows["silent"], rows  # aiohttp's read time-out, not the request's 60 s
