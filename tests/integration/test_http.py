"""The gateway over HTTP: official SDK clients (Streamable HTTP and SSE) in front, SDK servers over
stdio, Streamable HTTP and SSE behind, plus raw HTTP for the transport rules."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import httpx
import httpx2
import mcp.types as t
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, MCPError
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from tests.integration.helpers import (
    ROOT,
    ListChangedWatcher,
    demo_upstream,
    gateway_http,
    http_upstream,
    sdk_upstream,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HTTP = {"transport": "http", "port": 0}
FULL = "full-access-token-0123456789"
LIMITED = "limited-token-0123456789abc"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
JSON_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@asynccontextmanager
async def authorized(url: str, token: str) -> AsyncIterator[Client]:
    """An SDK client sending a bearer token; the SDK leaves closing a client it was given to its owner."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http_client,
        Client(streamable_http_client(url, http_client=http_client), mode="legacy", cache=None) as client,
    ):
        yield client


async def test_sdk_streamable_http_and_sse_clients(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", [demo_upstream("writing", "writing")], server=HTTP)
    async with gateway_http(config) as base:
        for transport in (f"{base}/mcp", sse_client(f"{base}/sse")):
            async with Client(transport, mode="legacy", cache=None) as client:
                listing = await client.list_prompts()
                assert [p.name for p in listing.prompts] == [
                    "writing__summarize",
                    "writing__translate",
                    "writing__proofread",
                ]
                result = await client.get_prompt("writing__translate", {"text": "hi", "language": "French"})
                assert isinstance(result, t.GetPromptResult)
                content = result.messages[0].content
                assert isinstance(content, t.TextContent)
                assert content.text.startswith("Translate the following text into French")
                completion = await client.complete(
                    t.PromptReference(type="ref/prompt", name="writing__translate"), {"name": "language", "value": "Fr"}
                )
                assert completion.completion.values == ["French"]
                with pytest.raises(MCPError) as info:
                    await client.get_prompt("writing__nope")
                assert (info.value.error.code, info.value.error.message) == (-32602, "Unknown prompt: writing__nope")


async def test_mixed_stdio_http_and_sse_upstreams_list_through_one_cursor(tmp_path: Path) -> None:
    async with http_upstream("completing", "streamable-http") as comp_url, http_upstream("dynamic", "sse") as dyn_url:
        config = write_config(
            tmp_path / "c.toml",
            [
                sdk_upstream("pag", "paginated", env={"PROMPT_COUNT": "40", "PAGE_SIZE": "7"}),
                {"namespace": "comp", "transport": "streamable-http", "url": comp_url, "timeout_s": 20},
                {"namespace": "dyn", "transport": "sse", "url": dyn_url, "timeout_s": 20},
            ],
            server=HTTP,
            gateway={"page_size": 10},
        )
        async with gateway_http(config) as base, Client(f"{base}/mcp", mode="legacy", cache=None) as client:
            names, cursor, pages = [], None, 0
            while True:
                page = await client.list_prompts(cursor=cursor)
                assert len(page.prompts) <= 10
                names += [p.name for p in page.prompts]
                pages += 1
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            expected = {
                "pag__rich",
                *(f"pag__p{i:04d}" for i in range(39)),
                "comp__weather",
                "comp__internal_notes",
                "dyn__pid",
                "dyn__whoami",
                "dyn__add",
                "dyn__storm",
            }
            assert sorted(names) == sorted(expected)
            assert pages >= 5
            ref = t.PromptReference(type="ref/prompt", name="comp__weather")
            result = await client.complete(ref, {"name": "city", "value": "n"}, context_arguments={"country": "FR"})
            assert result.completion.values == ["Nice"]
            weather = await client.get_prompt("comp__weather", {"country": "FR", "city": "Lyon"})
            assert weather.messages[0].content == t.TextContent(type="text", text="Weather in Lyon, FR (metric)")
            pid = await client.get_prompt("dyn__pid")
            assert isinstance(pid.messages[0].content, t.TextContent)


async def test_list_changed_reaches_fifty_concurrent_http_sessions(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml", [sdk_upstream("dyn", "dynamic")], server=HTTP, gateway={"list_changed_debounce_s": 0.05}
    )
    async with gateway_http(config) as base, AsyncExitStack() as stack:
        watchers = [ListChangedWatcher() for _ in range(50)]
        clients = [
            await stack.enter_async_context(Client(f"{base}/mcp", mode="legacy", cache=None, message_handler=w))
            for w in watchers
        ]
        # A change announced before a client's GET stream opens waits in its session's event log.
        await clients[0].get_prompt("dyn__add", {"name": "for_everyone"})
        async with anyio.create_task_group() as tg:
            for watcher in watchers:
                tg.start_soon(watcher.wait)
        assert all(w.count >= 1 for w in watchers)
        listing = await clients[49].list_prompts()
        assert "dyn__for_everyone" in [p.name for p in listing.prompts]


async def test_tokens_per_token_policy_and_credentials_stay_at_the_gateway(tmp_path: Path) -> None:
    async with http_upstream("dynamic", "streamable-http") as dyn_url:
        config = write_config(
            tmp_path / "c.toml",
            [
                demo_upstream("writing", "writing"),
                {
                    "namespace": "dyn",
                    "transport": "streamable-http",
                    "url": dyn_url,
                    "headers": {"X-Upstream-Key": "${UPSTREAM_KEY}"},
                },
            ],
            server=HTTP,
            tokens=[
                {"name": "full", "token": FULL},
                {"name": "limited", "token": LIMITED, "policy": {"allow": ["writing__summarize"]}},
            ],
        )
        os.environ["UPSTREAM_KEY"] = "upstream-secret"
        try:
            async with gateway_http(config) as base:
                async with httpx.AsyncClient() as raw:
                    missing = await raw.post(f"{base}/mcp", json=INIT, headers=JSON_HEADERS)
                    assert missing.status_code == 401
                    assert missing.headers["www-authenticate"] == 'Bearer realm="mcp-prompt-gateway"'
                    wrong = await raw.post(
                        f"{base}/mcp", json=INIT, headers={**JSON_HEADERS, "Authorization": "Bearer wrong-token-000000"}
                    )
                    assert wrong.status_code == 401
                    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
                    assert (await raw.get(f"{base}/sse")).status_code == 401
                async with authorized(f"{base}/mcp", LIMITED) as limited:
                    assert [p.name for p in (await limited.list_prompts()).prompts] == ["writing__summarize"]
                    with pytest.raises(MCPError) as info:
                        await limited.get_prompt("writing__translate", {"text": "x", "language": "y"})
                    assert info.value.error.message == "Unknown prompt: writing__translate"
                async with authorized(f"{base}/mcp", FULL) as full:
                    assert len((await full.list_prompts()).prompts) == 3 + 4
                    seen = await full.get_prompt("dyn__whoami")
                    content = seen.messages[0].content
                    assert isinstance(content, t.TextContent)
                    assert json.loads(content.text) == {"authorization": None, "x-upstream-key": "upstream-secret"}
        finally:
            del os.environ["UPSTREAM_KEY"]


async def test_origin_and_host_validation(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml",
        [demo_upstream("writing", "writing")],
        server={**HTTP, "allowed_origins": ["https://app.example.com"]},
    )
    async with gateway_http(config) as base, httpx.AsyncClient() as raw:
        for origin, status in (
            ("http://evil.example", 403),
            ("http://localhost.evil.example:80", 403),
            ("http://localhost:6274", 200),
            ("https://app.example.com", 200),
        ):
            response = await raw.post(f"{base}/mcp", json=INIT, headers={**JSON_HEADERS, "Origin": origin})
            assert response.status_code == status, origin
        rebound = await raw.post(f"{base}/mcp", json=INIT, headers={**JSON_HEADERS, "Host": "evil.example"})
        assert rebound.status_code == 421
        assert (await raw.get(f"{base}/sse", headers={"Origin": "http://evil.example"})).status_code == 403


async def test_bodies_over_the_size_bound_are_refused_whether_declared_or_streamed(tmp_path: Path) -> None:
    limit = 64 * 1024
    config = write_config(
        tmp_path / "c.toml", [demo_upstream("writing", "writing")], server=HTTP, gateway={"max_message_bytes": limit}
    )

    def chunked(body: bytes, size: int = 4096) -> AsyncIterator[bytes]:
        async def pieces() -> AsyncIterator[bytes]:
            for start in range(0, len(body), size):
                yield body[start : start + size]

        return pieces()

    padded = {**INIT, "params": {**INIT["params"], "_meta": {"pad": "x" * (limit // 2)}}}  # under the bound
    within = json.dumps(padded).encode()
    over = json.dumps({**INIT, "params": {**INIT["params"], "_meta": {"pad": "x" * limit}}}).encode()
    async with gateway_http(config) as base, httpx.AsyncClient() as raw:
        url = f"{base}/mcp"
        declared = await raw.post(url, content=over, headers=JSON_HEADERS)
        streamed = await raw.post(url, content=chunked(over), headers=JSON_HEADERS)  # no Content-Length
        assert (declared.status_code, streamed.status_code) == (413, 413)
        assert f"the limit is {limit} bytes" in streamed.json()["error"]["message"]
        # answered under its id, read from its first bytes (an operator's tester saw "id": null)
        assert (declared.json()["id"], streamed.json()["id"]) == (INIT["id"], INIT["id"])
        pieced = await raw.post(url, content=chunked(within), headers=JSON_HEADERS)  # many pieces, one message
        assert pieced.status_code == 200
        t.InitializeResult.model_validate(pieced.json()["result"])


async def test_session_rules(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml",
        [sdk_upstream("dyn", "dynamic")],
        server=HTTP,
        tokens=[{"name": "a", "token": FULL}, {"name": "b", "token": LIMITED}],
        gateway={"list_changed_debounce_s": 0.01},
    )
    auth_a = {**JSON_HEADERS, "Authorization": f"Bearer {FULL}"}
    auth_b = {**JSON_HEADERS, "Authorization": f"Bearer {LIMITED}"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}
    async with gateway_http(config) as base, httpx.AsyncClient(timeout=20) as raw:
        url = f"{base}/mcp"
        first = await raw.post(url, json=INIT, headers=auth_a)
        session_id = first.headers["mcp-session-id"]
        assert len(session_id) >= 32
        assert t.InitializeResult.model_validate(first.json()["result"]).protocol_version == "2025-11-25"
        second = await raw.post(url, json=INIT, headers=auth_a)
        assert second.headers["mcp-session-id"] != session_id
        with_session = {**auth_a, "Mcp-Session-Id": session_id}
        assert (
            await raw.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=with_session)
        ).status_code == 202
        no_session = await raw.post(url, json=listing, headers=auth_a)
        assert (no_session.status_code, no_session.json()["id"]) == (400, listing["id"])  # under its id (was null)
        unknown = await raw.post(url, json=listing, headers={**auth_a, "Mcp-Session-Id": "nope"})
        assert (unknown.status_code, unknown.json()["id"]) == (404, listing["id"])
        hijack = await raw.post(url, json=listing, headers={**auth_b, "Mcp-Session-Id": session_id})
        assert hijack.status_code == 404  # another token's session looks like no session at all
        bad_version = await raw.post(url, json=listing, headers={**with_session, "MCP-Protocol-Version": "1999-01-01"})
        assert bad_version.status_code == 400
        ok = await raw.post(url, json=listing, headers={**with_session, "MCP-Protocol-Version": "2025-11-25"})
        assert ok.status_code == 200
        assert "dyn__add" in [p.name for p in t.ListPromptsResult.model_validate(ok.json()["result"]).prompts]
        assert (await raw.post(url, content=b"{nope", headers=with_session)).json()["error"]["code"] == -32700
        assert (
            await raw.post(url, content=b"{}", headers={**with_session, "Content-Type": "text/plain"})
        ).status_code == 415

        add = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "prompts/get",
            "params": {"name": "dyn__add", "arguments": {"name": "one"}},
        }
        sse_headers = {"Authorization": f"Bearer {FULL}", "Mcp-Session-Id": session_id, "Accept": "text/event-stream"}
        async with raw.stream("GET", url, headers=sse_headers) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            conflict = await raw.get(url, headers=sse_headers)
            assert conflict.status_code == 409
            await raw.post(url, json=add, headers=with_session)
            event = await _next_event(stream)
        first = int(event["id"])  # (each session's log numbers in a block of its own: sse.py)
        assert json.loads(event["data"]) == {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"}
        await raw.post(
            url,
            json={**add, "id": 4, "params": {"name": "dyn__add", "arguments": {"name": "two"}}},
            headers=with_session,
        )  # announced while no stream is open: kept for replay
        async with raw.stream("GET", url, headers={**sse_headers, "Last-Event-ID": str(first)}) as resumed:
            replayed = await _next_event(resumed)
        assert replayed["id"] == str(first + 1)
        for bad in (b"\xb2", b"1\xb9", b"9" * 4300):  # latin-1 superscript digits: isdigit(), yet int() refuses
            refused = await raw.get(url, headers={**sse_headers, "Last-Event-ID": bad})  # type: ignore[dict-item]
            assert refused.status_code == 400, bad
            assert refused.json()["error"]["code"] == -32600

        assert (await raw.delete(url, headers=with_session)).status_code == 200
        assert (await raw.post(url, json=listing, headers=with_session)).status_code == 404


async def _next_event(stream: httpx.Response) -> dict[str, str]:
    event: dict[str, str] = {}
    with anyio.fail_after(20):
        async for line in stream.aiter_lines():
            if not line:
                if "data" in event:
                    return event
                event = {}
                continue
            if line.startswith(":"):
                continue
            key, _, value = line.partition(": ")
            event[key] = value
    raise AssertionError("stream ended without an event")


async def _start_upstream(command: list[str]) -> Process:
    process = await anyio.open_process(command, cwd=ROOT)
    assert process.stdout is not None
    with anyio.fail_after(20):
        await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 100)
    return process


async def test_an_upstream_http_session_lost_to_a_restart_is_re_initialized(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "tests.servers.http_serve", "dynamic", "streamable-http", str(port)]
    changes = ListChangedWatcher()
    config = write_config(
        tmp_path / "c.toml",
        [
            {
                "namespace": "dyn",
                "transport": "streamable-http",
                "url": f"http://127.0.0.1:{port}/mcp",
                "timeout_s": 10,
            },
        ],
        server=HTTP,
    )
    upstream = await _start_upstream(command)
    try:
        async with (
            gateway_http(config) as base,
            Client(f"{base}/mcp", mode="legacy", cache=None, message_handler=changes) as client,
        ):
            before = (await client.get_prompt("dyn__pid")).messages[0].content
            assert isinstance(before, t.TextContent)
            upstream.kill()
            await upstream.wait()
            await upstream.aclose()
            codes: list[int] = []
            upstream = await _start_upstream(command)  # same port, new process: the old session id is unknown
            with anyio.fail_after(60):
                while True:
                    await changes.wait(timeout=60)
                    try:
                        after = (await client.get_prompt("dyn__pid")).messages[0].content
                    except MCPError as exc:  # still reconnecting: an upstream error, never the client's fault
                        codes.append(exc.error.code)
                        continue
                    assert isinstance(after, t.TextContent)
                    if after.text != before.text:
                        break
            assert set(codes) <= {-32603}
    finally:
        upstream.kill()
        await upstream.wait()
        await upstream.aclose()


def test_serve_refuses_an_unauthenticated_non_loopback_bind(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml",
        [demo_upstream("writing", "writing")],
        server={"transport": "http", "host": "0.0.0.0", "port": 0},  # noqa: S104 - refused before binding
    )
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "neither server.tokens nor server.auth is set" in result.stderr


@pytest.mark.parametrize("host", ["127.0.0.11", "::1"])
async def test_every_loopback_address_is_loopback(tmp_path: Path, host: str) -> None:
    """All of 127.0.0.0/8 and ::1 are reachable from this machine only: served without tokens, and the
    Host header naming the bound address is accepted (127.0.0.11 was refused as exposed)."""
    config = write_config(tmp_path / "c.toml", [demo_upstream("writing", "writing")], server={**HTTP, "host": host})
    async with gateway_http(config) as base:
        assert base.startswith(f"http://{f'[{host}]' if ':' in host else host}:")
        async with Client(f"{base}/mcp", mode="legacy", cache=None) as client:
            assert len((await client.list_prompts()).prompts) == 3


async def test_a_413_neither_asks_for_the_body_nor_waits_for_it_nor_fails_on_an_odd_id(tmp_path: Path) -> None:
    """A reviewer of the 413-under-its-id change: a client sending "Expect: 100-continue" was told to
    send its 10 MB; one that declared a body and sent none held the 413 for the body's 30 s time-out; an
    id that is not UTF-8, a bad escape or a lone surrogate made it a 500."""
    config = write_config(
        tmp_path / "c.toml", [demo_upstream("writing", "writing")], server=HTTP, gateway={"max_message_bytes": 1024}
    )

    def post(body: bytes, *, length: int | None = None, expect: bool = False) -> bytes:
        head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n"
        head += b"Content-Type: application/json\r\nContent-Length: %d\r\n" % (len(body) if length is None else length)
        return head + (b"Expect: 100-continue\r\n" if expect else b"") + b"\r\n" + body

    async with gateway_http(config) as base:
        host, port = base.removeprefix("http://").rsplit(":", 1)

        async def answer(request: bytes) -> bytes:
            async with await anyio.connect_tcp(host, int(port)) as stream:
                await stream.send(request)
                received = b""
                with anyio.fail_after(20):  # (the body's time-out is 30 s: a 413 must not wait for it)
                    while b"\r\n\r\n" not in received or not received.rstrip().endswith(b"}"):
                        received += await stream.receive()
                return received

        for odd in (b'"caf\xe9"', b'"\\q"', b'"\\ud800"'):
            body = b'{"jsonrpc":"2.0","id":' + odd + b',"method":"initialize","params":{"p":"' + b"x" * 2000 + b'"}}'
            said = await answer(post(body))
            assert said.startswith(b"HTTP/1.1 413"), said[:200]
            assert b'"id":null' in said
        for request in (post(b"", length=10_000_000, expect=True), post(b"", length=10_000_000)):
            said = await answer(request)
            assert said.startswith(b"HTTP/1.1 413"), said[:200]  # (not "100 Continue")
