"""Revision 2026-07-28 end to end: SDK clients pinned to it over stdio and Streamable HTTP, 2026-07-28
upstreams over stdio and Streamable HTTP, and clients of older revisions served by newer upstreams."""

from __future__ import annotations

import base64
import itertools
import json
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp.types as t
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, MCPError

from tests.integration.helpers import (
    ROOT,
    ListChangedWatcher,
    demo_upstream,
    gateway_command,
    gateway_params,
    http_upstream,
    running_gateway,
    sdk_upstream,
    write_config,
)
from tests.schema_check import check

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HTTP = {"transport": "http", "port": 0}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}


async def answer_who(context: object, params: t.ElicitRequestParams) -> t.ElicitResult:
    assert isinstance(params, t.ElicitRequestFormParams)
    assert params.message == "Who are you?"
    return t.ElicitResult(action="accept", content={"name": "Ada"})


def upstreams() -> list[dict[str, Any]]:
    return [
        sdk_upstream("dyn", "dynamic"),
        sdk_upstream("comp", "completing"),
        sdk_upstream("rich", "rich"),
        demo_upstream("writing", "writing"),  # a handshake-only server among 2026-07-28 ones
    ]


async def exercise(client: Client) -> None:
    """What a 2026-07-28 client does through the gateway, whatever the transport."""
    assert client.protocol_version == "2026-07-28"
    listing = await client.list_prompts()
    names = {p.name for p in listing.prompts}
    assert {"dyn__pid", "comp__weather", "rich__voice", "rich__greet", "writing__summarize"} <= names
    assert listing.ttl_ms == 0  # the demo server never announces changes: the list may change any time
    voice = await client.get_prompt("rich__voice")
    assert [m.content.type for m in voice.messages] == ["audio", "resource_link"]  # this client speaks both
    greeting = await client.get_prompt("rich__greet")  # InputRequiredResult relayed; the retry goes through too
    assert greeting.messages[0].content == t.TextContent(type="text", text="Hello, Ada (state asked-once)")
    ref = t.PromptReference(type="ref/prompt", name="comp__weather")
    completed = await client.complete(ref, {"name": "city", "value": "n"}, context_arguments={"country": "FR"})
    assert completed.completion.values == ["Nice"]
    async with client.listen(prompts_list_changed=True) as subscription:
        assert subscription.honored.prompts_list_changed is True
        await client.get_prompt("dyn__add", {"name": "fresh"})
        with anyio.fail_after(20):
            async for _ in subscription:
                break
    assert "dyn__fresh" in {p.name for p in (await client.list_prompts()).prompts}


async def test_a_2026_client_over_stdio(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", upstreams())
    async with Client(gateway_params(config), mode="2026-07-28", cache=None, elicitation_callback=answer_who) as c:
        await exercise(c)
    async with Client(gateway_params(config), mode="auto", cache=None) as auto:
        assert auto.protocol_version == "2026-07-28"  # it discovered the gateway, so it did not fall back
        assert auto.server_info is not None
        assert auto.server_info.name == "mcp-prompt-gateway"
        assert auto.server_capabilities.prompts is not None
        assert auto.server_capabilities.prompts.list_changed is True


async def test_a_2026_client_over_streamable_http_and_each_upstream_in_its_own_era(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", upstreams(), server=HTTP)
    async with running_gateway(config) as gateway:
        eras = {}
        for _ in range(4):
            event = await gateway.wait_for_event("upstream_state")
            while event["state"] != "ready":
                event = await gateway.wait_for_event("upstream_state")
            eras[event["upstream"]] = event["protocol_version"]
        assert eras == {"dyn": "2026-07-28", "comp": "2026-07-28", "rich": "2026-07-28", "writing": "2025-11-25"}
        url = f"{gateway.url}/mcp"
        async with Client(url, mode="2026-07-28", cache=None, elicitation_callback=answer_who) as client:
            await exercise(client)


async def post(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], *, timeout: float = 20, **headers: str
) -> httpx.Response:
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if body["params"].get("_meta", {}).get("progressToken") is not None:  # an SSE answer: read it to the end
        async with http.stream(
            "POST", url, content=json.dumps(body), headers={**base, **headers}, timeout=timeout
        ) as r:
            await r.aread()
            return r
    return await http.post(url, content=json.dumps(body), headers={**base, **headers}, timeout=timeout)


def modern(request_id: int, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"_meta": dict(ENVELOPE), **params}}


async def test_stateless_http_requests_are_checked_in_the_spec_order(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", [sdk_upstream("rich", "rich")], server=HTTP)
    async with running_gateway(config) as gateway, httpx.AsyncClient() as http:
        url = f"{gateway.url}/mcp"
        ok = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/get", "Mcp-Name": "rich__voice"}

        answer = await post(http, url, modern(1, "prompts/get", name="rich__voice"), **ok)
        assert answer.status_code == 200
        assert "mcp-session-id" not in answer.headers  # no sessions in this revision
        check("2026-07-28", "GetPromptResultResponse", answer.json())
        audited = await gateway.wait_for_event("audit", prompt="rich__voice")
        assert (audited["outcome"], audited["request_id"]) == ("ok", 1)  # the request's context is on its line

        discovered = await post(http, url, modern(2, "server/discover"), **{**ok, "Mcp-Method": "server/discover"})
        check("2026-07-28", "DiscoverResultResponse", discovered.json())

        listed = await post(http, url, modern(3, "prompts/list"), **{**ok, "Mcp-Method": "prompts/list"})
        check("2026-07-28", "ListPromptsResultResponse", listed.json())
        assert 0 < listed.json()["result"]["ttlMs"] <= 30_000  # what is left of the upstream's own hint

        named = "=?base64?" + base64.b64encode(b"rich__voice").decode() + "?="
        assert (
            await post(http, url, modern(4, "prompts/get", name="rich__voice"), **{**ok, "Mcp-Name": named})
        ).is_success

        no_caps = modern(5, "prompts/list")
        del no_caps["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        refused = await post(http, url, no_caps, **{**ok, "Mcp-Method": "prompts/list"})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == -32602
        assert "clientCapabilities" in refused.json()["error"]["message"]

        mismatch = await post(
            http, url, modern(6, "prompts/get", name="rich__voice"), **{**ok, "Mcp-Name": "rich__greet"}
        )
        assert mismatch.status_code == 400
        check("2026-07-28", "HeaderMismatchError", mismatch.json())

        missing = await post(http, url, modern(7, "prompts/list"), **{"MCP-Protocol-Version": "2026-07-28"})
        assert (missing.status_code, missing.json()["error"]["code"]) == (400, -32020)

        future = modern(8, "prompts/list")
        future["params"]["_meta"] = {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
        unsupported = await post(
            http, url, future, **{"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "prompts/list"}
        )
        assert unsupported.status_code == 400
        check("2026-07-28", "UnsupportedProtocolVersionError", unsupported.json())
        assert "2026-07-28" in unsupported.json()["error"]["data"]["supported"]

        unknown = await post(http, url, modern(9, "tools/list"), **{**ok, "Mcp-Method": "tools/list"})
        assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, -32601)

        gone = await http.get(url, headers={"MCP-Protocol-Version": "2026-07-28", "Accept": "text/event-stream"})
        assert gone.status_code == 405

        batch = await http.post(
            url, json=[modern(12, "prompts/list")], headers={"Accept": "application/json, text/event-stream", **ok}
        )
        assert batch.status_code == 400  # it was told "unsupported MCP-Protocol-Version '2026-07-28'"
        assert batch.json()["error"]["message"] == (
            "Bad Request: 2026-07-28 has no batches: send each request in a POST of its own"
        )

        stale_session = await post(
            http, url, modern(10, "prompts/list"), **{**ok, "Mcp-Method": "prompts/list", "Mcp-Session-Id": "nope"}
        )
        assert stale_session.status_code == 200  # an old session header is ignored, not a 404

        # A legacy session on the same endpoint keeps working alongside.
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "0"}}
        legacy = await post(http, url, {"jsonrpc": "2.0", "id": 11, "method": "initialize", "params": init})
        assert legacy.json()["result"]["protocolVersion"] == "2025-11-25"
        assert "mcp-session-id" in legacy.headers


async def test_a_request_asking_for_a_stream_is_refused_with_its_status_before_any_notification(
    tmp_path: Path,
) -> None:
    """A listen, or a request with a progress token, is answered as a stream once it has something to
    stream; what it is told first (refused, unknown, invalid) is JSON with its status (it was a 200 stream)."""
    config = write_config(
        tmp_path / "c.toml", [sdk_upstream("rich", "rich"), sdk_upstream("bad", "faulty")], server=HTTP
    )
    async with running_gateway(config) as gateway, httpx.AsyncClient(timeout=20) as http:
        url = f"{gateway.url}/mcp"

        def with_token(body: dict[str, Any]) -> dict[str, Any]:
            body["params"]["_meta"]["progressToken"] = 1
            return body

        future = with_token(modern(1, "prompts/list"))
        future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2099-01-01"
        cases = [
            (future, {"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "prompts/list"}, 400, -32022),
            (with_token(modern(2, "no/such")), {"Mcp-Method": "no/such"}, 404, -32601),
            (modern(3, "subscriptions/listen", notifications=5), {"Mcp-Method": "subscriptions/listen"}, 400, -32602),
            (
                with_token(modern(4, "prompts/get", name="rich__nope")),
                {"Mcp-Method": "prompts/get", "Mcp-Name": "rich__nope"},
                400,
                -32602,
            ),
        ]
        for body, headers, status, code in cases:
            answer = await post(http, url, body, **{"MCP-Protocol-Version": "2026-07-28", **headers})
            assert answer.headers["content-type"].startswith("application/json"), (body, answer.text)
            assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), answer.text
        # one with something to stream is a stream: its progress, then its answer; one without, JSON
        get = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/get", "Mcp-Name": "bad__progress"}
        listing = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/list"}
        assert "bad__progress" in (await post(http, url, modern(7, "prompts/list"), **listing)).text
        streamed = await post(http, url, with_token(modern(5, "prompts/get", name="bad__progress")), **get)
        assert (streamed.status_code, streamed.headers["content-type"]) == (200, "text/event-stream; charset=utf-8"), (
            streamed.text
        )
        assert streamed.text.index("notifications/progress") < streamed.text.index('"result"')
        get["Mcp-Name"] = "rich__voice"
        quick = await post(http, url, with_token(modern(6, "prompts/get", name="rich__voice")), **get)
        assert (quick.status_code, quick.headers["content-type"]) == (200, "application/json")
        check("2026-07-28", "GetPromptResultResponse", quick.json())
        # refused by its HTTP status once its body was read: under its id (it was null)
        listen = {
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "subscriptions/listen",
            "Accept": "application/json",
        }
        body = modern(8, "subscriptions/listen", notifications={"promptsListChanged": True})
        not_acceptable = await post(http, url, body, **listen)
        assert (not_acceptable.status_code, not_acceptable.json()["id"]) == (406, 8), not_acceptable.text


async def test_a_listen_stream_over_http_is_tagged_and_closed_by_the_client(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", [sdk_upstream("dyn", "dynamic")], server=HTTP)
    async with running_gateway(config) as gateway, httpx.AsyncClient(timeout=20) as http:
        url = f"{gateway.url}/mcp"
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "subscriptions/listen",
        }
        body = modern(42, "subscriptions/listen", notifications={"promptsListChanged": True, "toolsListChanged": True})
        async with http.stream("POST", url, content=json.dumps(body), headers=headers) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            lines = stream.aiter_lines()

            async def next_message() -> dict[str, Any]:
                async for line in lines:
                    if line.startswith("data: "):
                        return json.loads(line[6:])  # type: ignore[no-any-return]
                raise AssertionError("the stream ended")

            ack = await next_message()
            check("2026-07-28", "SubscriptionsAcknowledgedNotification", ack)
            assert ack["params"] == {
                "_meta": {"io.modelcontextprotocol/subscriptionId": 42},
                "notifications": {"promptsListChanged": True},  # tools are not ours to announce
            }
            get = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/get", "Mcp-Name": "dyn__add"}
            added = await post(http, url, modern(43, "prompts/get", name="dyn__add", arguments={"name": "x"}), **get)
            assert added.status_code == 200
            changed = await next_message()
            check("2026-07-28", "PromptListChangedNotification", changed)
            assert changed["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": 42}
        # Closing the stream ended the subscription: the gateway forgets it (its metrics gauge counts it).
        with anyio.fail_after(10):
            while True:
                metrics = (await http.get(f"{gateway.url}/metrics")).text
                if "prompt_gateway_sessions 0.0" in metrics:
                    break
                await anyio.sleep(0.05)


async def test_old_clients_get_new_content_in_a_form_their_revision_defines(tmp_path: Path) -> None:
    """A 2024-11-05 client of a 2026-07-28 upstream: audio and resource_link are rewritten (and validated
    against the 2024-11-05 schema); a prompt that needs a multi round-trip is a clear error."""
    config = write_config(tmp_path / "c.toml", [sdk_upstream("rich", "rich")])
    async with await anyio.open_process(gateway_command(config, "serve"), cwd=ROOT) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        out = BufferedByteReceiveStream(process.stdout)

        async def call(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
            message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            assert process.stdin is not None
            await process.stdin.send(json.dumps(message).encode() + b"\n")
            with anyio.fail_after(20):
                return json.loads(await out.receive_until(b"\n", 1 << 20))  # type: ignore[no-any-return]

        init = {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "old", "version": "0"}}
        assert (await call(1, "initialize", init))["result"]["protocolVersion"] == "2024-11-05"
        await process.stdin.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        listing = await call(2, "prompts/list", {})
        check("2024-11-05", "JSONRPCResponse", listing)
        assert "ttlMs" not in listing["result"]
        voice = await call(3, "prompts/get", {"name": "rich__voice"})
        check("2024-11-05", "GetPromptResult", voice["result"])
        audio, link = (m["content"] for m in voice["result"]["messages"])
        assert audio["type"] == "resource"
        assert audio["resource"]["mimeType"] == "audio/wav"
        assert link == {"type": "text", "text": "Resource link: today <file:///notes/today.md> (text/markdown)"}
        greet = await call(4, "prompts/get", {"name": "rich__greet"})
        assert greet["error"]["code"] == -32603
        assert "only 2026-07-28 clients can answer" in greet["error"]["message"]
        await process.stdin.aclose()
        with anyio.fail_after(20):
            await process.wait()


async def test_a_2026_upstream_over_streamable_http(tmp_path: Path) -> None:
    """Probed, spoken to statelessly (headers mirrored), its list changes reach a handshake-era client."""
    async with http_upstream("dynamic", "streamable-http") as upstream_url:
        config = write_config(
            tmp_path / "c.toml",
            [{"namespace": "remote", "transport": "streamable-http", "url": upstream_url}],
            server=HTTP,
        )
        async with running_gateway(config) as gateway:
            ready = await gateway.wait_for_event("upstream_state")
            while ready["state"] != "ready":
                ready = await gateway.wait_for_event("upstream_state")
            assert ready["protocol_version"] == "2026-07-28"
            changes = ListChangedWatcher()
            async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None, message_handler=changes) as client:
                await client.get_prompt("remote__add", {"name": "over_http"})
                await changes.wait()
                assert "remote__over_http" in {p.name for p in (await client.list_prompts()).prompts}
                pid = await client.get_prompt("remote__pid")
                assert isinstance(pid.messages[0].content, t.TextContent)


async def test_the_era_can_be_pinned_per_upstream(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.toml",
        [
            sdk_upstream("old", "dynamic", protocol="legacy"),  # a dual-era server held to the handshake
            demo_upstream("new", "writing", protocol="modern"),  # a handshake-only server cannot be modern
        ],
        server=HTTP,
    )
    async with running_gateway(config) as gateway:
        seen: dict[str, dict[str, Any]] = {}
        while len(seen) < 2:
            event = await gateway.wait_for_event("upstream_state")
            if event["state"] in ("ready", "failed"):
                seen[event["upstream"]] = event
        assert seen["old"]["protocol_version"] == "2025-11-25"
        assert seen["new"]["state"] == "failed"
        assert "refused server/discover" in seen["new"]["error"]
        async with Client(f"{gateway.url}/mcp", mode="2026-07-28", cache=None) as client:
            names = {p.name for p in (await client.list_prompts()).prompts}
            assert "old__pid" in names
            with pytest.raises(MCPError, match="Upstream 'new' has failed and is not restarted"):
                await client.get_prompt("new__summarize")


@pytest.mark.parametrize("streamed", [False, True])
async def test_closing_the_connection_cancels_the_request_upstream(tmp_path: Path, streamed: bool) -> None:
    """2026-07-28 has no notifications/cancelled over HTTP: a client cancels by hanging up, on a JSON
    answer as on an SSE one, and the gateway cancels its upstream request in turn."""
    config = write_config(tmp_path / "c.toml", [sdk_upstream("bad", "faulty")], server=HTTP)
    get = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/get", "Mcp-Name": "bad__slow"}
    slow = modern(1, "prompts/get", name="bad__slow")
    if streamed:
        slow["params"]["_meta"]["progressToken"] = "p1"
    async with running_gateway(config) as gateway, httpx.AsyncClient() as http:
        url = f"{gateway.url}/mcp"
        with pytest.raises(httpx.ReadTimeout):
            await post(http, url, slow, timeout=0.5, **get)
        status_headers = {**get, "Mcp-Name": "bad__cancel_status"}
        with anyio.fail_after(10):
            while True:
                answer = await post(http, url, modern(2, "prompts/get", name="bad__cancel_status"), **status_headers)
                status = json.loads(answer.json()["result"]["messages"][0]["content"]["text"])
                if status["cancelled"]:
                    break
                await anyio.sleep(0.05)
        assert status["cancelled"] == status["slow"]


async def test_a_2026_client_of_a_2024_11_05_upstream(tmp_path: Path) -> None:
    """The reverse direction: results of the oldest revision reach a 2026-07-28 client in its shape."""
    config = write_config(tmp_path / "c.toml", [sdk_upstream("old", "old")], server=HTTP)
    async with running_gateway(config) as gateway, httpx.AsyncClient() as http:
        url = f"{gateway.url}/mcp"
        ready = await gateway.wait_for_event("upstream_state")
        assert (ready["state"], ready["protocol_version"]) == ("ready", "2024-11-05")  # the probe fell back
        base = {"MCP-Protocol-Version": "2026-07-28"}
        listed = await post(http, url, modern(1, "prompts/list"), **base, **{"Mcp-Method": "prompts/list"})
        check("2026-07-28", "ListPromptsResultResponse", listed.json())
        assert listed.json()["result"]["ttlMs"] == 0  # it never announces changes
        got = await post(
            http,
            url,
            modern(2, "prompts/get", name="old__haiku", arguments={"topic": "autumn"}),
            **base,
            **{"Mcp-Method": "prompts/get", "Mcp-Name": "old__haiku"},
        )
        check("2026-07-28", "GetPromptResultResponse", got.json())
        assert got.json()["result"]["resultType"] == "complete"
        ref = {"type": "ref/prompt", "name": "old__haiku"}
        completed = await post(
            http,
            url,
            modern(3, "completion/complete", ref=ref, argument={"name": "topic", "value": "au"}),
            **base,
            **{"Mcp-Method": "completion/complete"},
        )
        check("2026-07-28", "CompleteResultResponse", completed.json())
        assert completed.json()["result"]["completion"]["values"] == ["autumn", "august"]


async def test_a_listen_stream_that_was_up_is_reopened_promptly_each_time_it_ends(tmp_path: Path) -> None:
    """The retry delay grows only while re-opening fails: a server ending acknowledged streams (a
    restart, a load balancer) sees the gateway back within the first delay every time, not after 2, 4,
    8 s."""
    config = write_config(tmp_path / "c.toml", [sdk_upstream("fickle", "fickle_listener")], server=HTTP)
    async with running_gateway(config) as gateway:
        ended_at: list[float] = []
        for _ in range(4):
            await gateway.wait_for_event("upstream_listen_ended", timeout=20)
            ended_at.append(time.monotonic())
    gaps = [later - earlier for earlier, later in itertools.pairwise(ended_at)]
    assert all(gap < 1.8 for gap in gaps), gaps  # the first delay is 0.5-1 s; doubling would make 2 and 4


async def test_a_server_pinning_its_era_on_the_request_after_the_probe_is_held_modern(tmp_path: Path) -> None:
    """The TypeScript SDK 2.x ``serveStdio`` pins a stdio connection's era on the first request after
    ``server/discover``. The ping the gateway sends behind the probe was bare, so every such server was
    pinned to the handshake era and refused ``subscriptions/listen`` as an unknown method, retried for
    ever; the ping now carries the envelope."""
    config = write_config(tmp_path / "c.toml", [sdk_upstream("pin", "era_pinning")], server=HTTP)
    async with running_gateway(config) as gateway:
        ready = await gateway.wait_for_event("upstream_state", upstream="pin", state="ready")
        assert ready["protocol_version"] == "2026-07-28"
        listen = await gateway.wait_for_event(("upstream_listening", "upstream_listen_refused"), upstream="pin")
        assert listen["event"] == "upstream_listening"
        assert listen["prompts_list_changed"] is True


async def test_the_sdks_2026_client_asking_for_progress_gets_a_stream_or_a_json_answer(tmp_path: Path) -> None:
    """The official client, asking for progress: progress then the result where the upstream sends any,
    and a plain JSON answer where it sends none (answered before any notification)."""
    from tests.integration.test_faults import get_with_progress

    config = write_config(
        tmp_path / "c.toml", [sdk_upstream("rich", "rich"), sdk_upstream("bad", "faulty")], server=HTTP
    )
    async with (
        running_gateway(config) as gateway,
        Client(f"{gateway.url}/mcp", mode="2026-07-28", cache=None) as client,
    ):
        assert "bad__progress" in {prompt.name for prompt in (await client.list_prompts()).prompts}
        result, progress = await get_with_progress(client, "bad__progress")
        assert progress == [(1.0, 2.0), (2.0, 2.0)]
        assert isinstance(result.messages[0].content, t.TextContent)
        result, progress = await get_with_progress(client, "rich__voice")
        assert progress == []
        assert isinstance(result.messages[0].content, t.AudioContent)
