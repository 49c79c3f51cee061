"""Values JSON text can spell but UTF-8 JSON cannot carry (lone surrogates, NaN), sent by a client over
every front end and by an upstream in every place it writes: each gets a JSON-RPC answer naming the
problem, and the gateway keeps serving everyone. Each of these used to end the process (exit 1)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.integration.helpers import ROOT, demo_upstream, gateway_command, running_gateway, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw"}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

# (raw frame, expected code, fragment of the message). Written by hand: no JSON library writes these.
CLIENT_FRAMES = [
    (rb'{"jsonrpc":"2.0","id":"\udfff","method":"ping"}', -32600, '"id" contains an unpaired'),
    (rb'{"jsonrpc":"2.0","id":11,"method":"pi\ud800ng"}', -32600, "method contains an unpaired"),
    (
        rb'{"jsonrpc":"2.0","id":12,"method":"prompts/get","params":{"name":"writing__\ud800"}}',
        -32602,
        "params.name contains an unpaired",
    ),
    (
        rb'{"jsonrpc":"2.0","id":13,"method":"prompts/get","params":{"name":"writing__proofread",'
        rb'"_meta":{"progressToken":"\udfff"}}}',
        -32602,
        "params._meta.progressToken",
    ),
    (
        rb'{"jsonrpc":"2.0","id":14,"method":"prompts/get","params":{"name":"writing__proofread",'
        rb'"arguments":{"text":"\ud83d"}}}',
        -32602,
        "params.arguments.text contains an unpaired",
    ),
    (
        rb'{"jsonrpc":"2.0","id":15,"method":"prompts/get","params":{"name":"writing__proofread",'
        rb'"arguments":{"text":NaN}}}',
        -32602,
        "params.arguments.text is not a finite number",
    ),
    (rb'{"jsonrpc":"2.0","id":16,"method":"ping","params":{"\udc00":1}}', -32602, "has a key with an unpaired"),
    (b'{"jsonrpc":"2.0","id":17,"method":"ping","params":{"x":"\xed\xa0\x80"}}', -32602, "params.x contains"),
    (rb'{"jsonrpc":"2.0","id":18,"method":"ping","params":{"x":-Infinity}}', -32602, "params.x is not a finite"),
]


def nested(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


# Nested past 64 levels: read (orjson reads 1,024), but neither orjson nor the standard library could write
# it again when it was relayed: an internal error and a traceback, or a frame the upstream dropped.
DEEP_FRAMES = [
    (b'{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":' + nested(1000) + b"}}", "params.name"),
    (
        b'{"jsonrpc":"2.0","id":20,"method":"prompts/get","params":{"name":"writing__proofread",'
        b'"arguments":{"text":"x"},"_meta":{"x":' + nested(200) + b"}}}",
        "params._meta.x",
    ),
    (b'{"jsonrpc":"2.0","id":21,"method":"ping","params":{"x":[' + nested(62) + b"]}}", "params.x[0]"),
]
CLIENT_FRAMES += [(frame, -32602, f"{where}.a") for frame, where in DEEP_FRAMES]
CLIENT_FRAMES.append((b'{"jsonrpc":"2.0","id":22,"method":"ping","params":{"x":[' + nested(61) + b"]}}", 0, ""))
"""(The last is as deep as may be: answered.)"""


def faulty() -> dict[str, Any]:
    return {
        "namespace": "bad",
        "command": sys.executable,
        "args": ["-m", "tests.servers.faulty"],
        "cwd": str(ROOT),
        "timeout_s": 5,
    }


def config(tmp_path: Path, **server: Any) -> Path:
    return write_config(
        tmp_path / "c.toml",
        [demo_upstream("writing", "writing"), faulty()],
        server=server or None,
    )


class RawStdio:
    """The gateway over stdio, spoken to in raw lines (no SDK can send these bytes)."""

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self._lines = BufferedByteReceiveStream(process.stdout)

    async def send(self, frame: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(frame + b"\n")

    async def answer(self, request_id: Any = None) -> dict[str, Any]:
        """The next answer (notifications are skipped)."""
        with anyio.fail_after(20):
            while True:
                message = json.loads(await self._lines.receive_until(b"\n", 1 << 22))
                if "method" not in message:
                    return message  # type: ignore[no-any-return]

    async def answer_batch(self) -> list[dict[str, Any]]:
        with anyio.fail_after(20):
            while True:
                message = json.loads(await self._lines.receive_until(b"\n", 1 << 22))
                if isinstance(message, list):
                    return message

    async def request(self, request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        await self.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode())
        answer = await self.answer()
        assert answer["id"] == request_id
        return answer


@asynccontextmanager
async def raw_stdio(config_path: Path) -> AsyncIterator[RawStdio]:
    command = [*gateway_command(config_path, "serve"), "--log-level", "error"]
    async with await anyio.open_process(command, cwd=ROOT) as process:
        raw = RawStdio(process)
        assert (await raw.request(1, "initialize", INIT))["result"]["protocolVersion"] == "2025-11-25"
        await raw.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        try:
            yield raw
        finally:
            process.terminate()
            with anyio.fail_after(20):
                await process.wait()


async def next_event_data(lines: AsyncIterator[str]) -> str:
    """The data of the next event on a legacy SSE stream."""
    with anyio.fail_after(20):
        async for line in lines:
            if line.startswith("data: "):
                return line[6:]
    raise AssertionError("stream ended")


def text_of(answer: dict[str, Any]) -> str:
    return answer["result"]["messages"][0]["content"]["text"]  # type: ignore[no-any-return]


async def test_a_clients_unrepresentable_values_over_stdio_are_answered_and_the_gateway_serves_on(
    tmp_path: Path,
) -> None:
    async with raw_stdio(config(tmp_path)) as raw:
        for frame, code, fragment in CLIENT_FRAMES:
            await raw.send(frame)
            answer = await raw.answer()
            if code == 0:
                assert answer["result"] == {}, answer
                continue
            assert answer["error"]["code"] == code, (frame, answer)
            assert fragment in answer["error"]["message"], (frame, answer)
            assert answer["id"] == (None if b'"id":"' in frame else json.loads(frame.split(b'"id":')[1].split(b",")[0]))
        # a batch with one bad member: the others are served
        await raw.send(b'[{"jsonrpc":"2.0","id":31,"method":"ping"},{"jsonrpc":"2.0","id":32,"method":"x\\udfff"}]')
        batch = {item["id"]: item for item in await raw.answer_batch()}
        assert batch[31]["result"] == {}
        assert batch[32]["error"]["code"] == -32600
        answer = await raw.request(40, "prompts/get", {"name": "writing__proofread", "arguments": {"text": "rain"}})
        assert "rain" in text_of(answer)
        assert raw.process.returncode is None


UPSTREAM_FAULTS = [
    ("bad__surrogate_result", "result.messages[0].content.text contains an unpaired"),
    ("bad__nan_meta", "result._meta.score is not a finite number"),
    ("bad__deep_result", "is nested more than 64 levels deep"),
    ("bad__deeper_result", "nested too deeply"),  # (it waited for the upstream's time-out)
]


async def test_an_upstreams_unrepresentable_values_fail_only_its_request_naming_it(tmp_path: Path) -> None:
    async with raw_stdio(config(tmp_path)) as raw:
        request_id = 100
        for name, fragment in UPSTREAM_FAULTS:
            request_id += 1
            answer = await raw.request(request_id, "prompts/get", {"name": name})
            assert answer["error"]["code"] == -32603, answer
            assert "Upstream 'bad'" in answer["error"]["message"]
            assert fragment in answer["error"]["message"]
        # an upstream request or notification under an unrepresentable id or value is dropped, not fatal
        assert text_of(await raw.request(110, "prompts/get", {"name": "bad__surrogate_request"})) == "asked first"
        answer = await raw.request(
            111, "prompts/get", {"name": "bad__surrogate_progress", "_meta": {"progressToken": "mine"}}
        )
        assert text_of(answer) == "progress sent"
        # the same upstream and the others serve on
        assert text_of(await raw.request(112, "prompts/get", {"name": "bad__ok"})) == "fine"
        answer = await raw.request(113, "prompts/get", {"name": "writing__proofread", "arguments": {"text": "snow"}})
        assert "snow" in text_of(answer)
        assert raw.process.returncode is None


async def test_a_clients_unrepresentable_values_over_streamable_http_get_json_rpc_errors(tmp_path: Path) -> None:
    async with running_gateway(config(tmp_path, transport="http", port=0)) as gateway:
        async with httpx.AsyncClient(base_url=gateway.url, headers=HEADERS, timeout=20) as http:
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
            first = await http.post("/mcp", json=init)
            second = await http.post("/mcp", json=init)
            sessions = [first.headers["mcp-session-id"], second.headers["mcp-session-id"]]
            for frame, code, fragment in CLIENT_FRAMES:
                response = await http.post("/mcp", content=frame, headers={"Mcp-Session-Id": sessions[0]})
                if code == 0:
                    assert response.json()["result"] == {}, response.text
                    continue
                assert response.status_code == 400, (frame, response.text)
                assert response.headers["content-type"].startswith("application/json")
                assert response.json()["error"]["code"] == code
                assert fragment in response.json()["error"]["message"]
            # an initialize nested too deeply (a bare 500: its capabilities went into the sealed session id)
            deep_init = (
                b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
                b'"capabilities":{"elicitation":' + nested(200) + b'},"clientInfo":{"name":"x"}}}'
            )
            response = await http.post("/mcp", content=deep_init)
            assert response.status_code == 400, response.text
            assert response.json()["error"]["code"] == -32602
            assert "params.capabilities.elicitation.a" in response.json()["error"]["message"]
            # 2026-07-28 requests (no session) likewise
            modern = (
                rb'{"jsonrpc":"2.0","id":5,"method":"prompts/list","params":{"_meta":{'
                rb'"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},'
                rb'"x":"\udfff"}}}'
            )
            response = await http.post("/mcp", content=modern, headers={"MCP-Protocol-Version": "2026-07-28"})
            assert response.status_code == 400
            assert response.json()["error"]["code"] == -32602
            # an upstream's unrepresentable answer: a JSON-RPC error naming the upstream, not a 500
            get = {"jsonrpc": "2.0", "id": 7, "method": "prompts/get", "params": {"name": "bad__surrogate_result"}}
            response = await http.post("/mcp", json=get, headers={"Mcp-Session-Id": sessions[0]})
            assert response.status_code == 200
            assert response.json()["error"]["code"] == -32603
            assert "Upstream 'bad'" in response.json()["error"]["message"]
            for session_id in sessions:
                listing = {"jsonrpc": "2.0", "id": 8, "method": "prompts/list"}
                response = await http.post("/mcp", json=listing, headers={"Mcp-Session-Id": session_id})
                assert response.status_code == 200
                assert any(p["name"] == "writing__proofread" for p in response.json()["result"]["prompts"])
        assert gateway.process.returncode is None


async def test_a_clients_unrepresentable_values_over_legacy_sse_are_answered_on_its_stream(tmp_path: Path) -> None:
    async with (
        running_gateway(config(tmp_path, transport="http", port=0)) as gateway,
        httpx.AsyncClient(base_url=gateway.url, timeout=20) as http,
        http.stream("GET", "/sse", headers={"Accept": "text/event-stream"}) as stream,
    ):
        lines = stream.aiter_lines()
        next_data = partial(next_event_data, lines)
        endpoint = await next_data()
        post_headers = {"Content-Type": "application/json"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
        assert (await http.post(endpoint, json=init, headers=post_headers)).status_code == 202
        assert json.loads(await next_data())["id"] == 1
        for frame, code, fragment in CLIENT_FRAMES:
            if code == 0:
                continue  # (answered on the stream)
            response = await http.post(endpoint, content=frame, headers=post_headers)
            assert response.status_code == 400, response.text
            assert response.json()["error"]["code"] == code
            assert fragment in response.json()["error"]["message"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert (await http.post(endpoint, json=ping, headers=post_headers)).status_code == 202
        assert json.loads(await next_data()) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        assert gateway.process.returncode is None


NON_OBJECT_REFS = ["x", 1, [], True, "\u0000"]
MODERN_META_VERSION = "io.modelcontextprotocol/protocolVersion"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def completion(request_id: int, ref: Any, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "completion/complete",
        "params": {"ref": ref, "argument": {"name": "a", "value": "b"}, **params},
    }


def names_the_ref(answer: dict[str, Any]) -> bool:
    return answer["error"]["code"] == -32602 and "params.ref" in answer["error"]["message"]


async def test_a_completion_whose_ref_is_no_object_is_invalid_params_on_every_front_end(tmp_path: Path) -> None:
    """It was -32603 Internal error over stdio, Streamable HTTP and stateless 2026-07-28: the audit read
    ``ref.name`` before the params were validated."""
    async with raw_stdio(config(tmp_path)) as raw:
        for i, ref in enumerate(NON_OBJECT_REFS):
            await raw.send(json.dumps(completion(50 + i, ref)).encode())
            assert names_the_ref(await raw.answer()), ref
        assert raw.process.returncode is None
    async with running_gateway(config(tmp_path, transport="http", port=0)) as gateway:
        async with httpx.AsyncClient(base_url=gateway.url, headers=HEADERS, timeout=20) as http:
            session = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
            session_id = session.headers["mcp-session-id"]
            for i, ref in enumerate(NON_OBJECT_REFS):
                response = await http.post("/mcp", json=completion(60 + i, ref), headers={"Mcp-Session-Id": session_id})
                assert names_the_ref(response.json()), (ref, response.text)
                stateless = completion(70 + i, ref, _meta=MODERN_META)
                modern_headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "completion/complete"}
                response = await http.post("/mcp", json=stateless, headers=modern_headers)
                assert names_the_ref(response.json()), (ref, response.text)
        assert gateway.process.returncode is None


LISTEN_AND_PING = json.dumps(
    [
        {
            "jsonrpc": "2.0",
            "id": 20,
            "method": "subscriptions/listen",
            "params": {"notifications": {}, "_meta": MODERN_META},
        },
        {"jsonrpc": "2.0", "id": 21, "method": "ping"},
    ]
).encode()


def assert_listen_refused_and_ping_answered(batch: list[dict[str, Any]]) -> None:
    answers = {answer["id"]: answer for answer in batch}
    assert answers[21]["result"] == {}
    assert answers[20]["error"]["code"] == -32600
    assert "cannot be sent in a batch" in answers[20]["error"]["message"]


async def test_a_2026_request_in_a_batch_is_refused_and_the_others_answered_over_stdio(tmp_path: Path) -> None:
    """A batch is answered once all its members are: a listen in one held the others' answers for as long as
    it listened (2026-07-28 has no batches)."""
    async with raw_stdio(config(tmp_path)) as raw:
        await raw.send(LISTEN_AND_PING)
        assert_listen_refused_and_ping_answered(await raw.answer_batch())


async def test_a_2026_request_in_a_batch_is_refused_over_http_and_a_2026_response_is_told_why(tmp_path: Path) -> None:
    async with (
        running_gateway(config(tmp_path, transport="http", port=0)) as gateway,
        httpx.AsyncClient(base_url=gateway.url, headers=HEADERS, timeout=20) as http,
    ):
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {**INIT, "protocolVersion": "2025-03-26"}}
        session = (await http.post("/mcp", json=init)).headers["mcp-session-id"]
        headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-03-26"}
        response = await http.post("/mcp", content=LISTEN_AND_PING, headers=headers)
        assert response.status_code == 200
        assert_listen_refused_and_ping_answered(response.json())
        bad = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"x":' + nested(80) + b"}}"
        response = await http.post(
            "/mcp", content=b"[" + bad + b',{"jsonrpc":"2.0","id":62,"method":"ping"}]', headers=headers
        )
        assert response.json() == [{"jsonrpc": "2.0", "id": 62, "result": {}}]  # a notification is never answered
        # a response posted as 2026-07-28: told so (it was told its supported version was unsupported)
        answer = {"jsonrpc": "2.0", "id": 1, "result": {}}
        response = await http.post("/mcp", json=answer, headers={"MCP-Protocol-Version": "2026-07-28"})
        assert response.status_code == 400
        assert "2026-07-28 clients send no JSON-RPC responses" in response.json()["error"]["message"]
        async with http.stream("GET", "/sse", headers={"Accept": "text/event-stream"}) as stream:  # legacy HTTP+SSE
            next_data = partial(next_event_data, stream.aiter_lines())
            endpoint = await next_data()
            post = {"Content-Type": "application/json"}
            await http.post(endpoint, json={**init, "params": {**INIT, "protocolVersion": "2024-11-05"}}, headers=post)
            assert json.loads(await next_data())["id"] == 1
            assert (await http.post(endpoint, content=LISTEN_AND_PING, headers=post)).status_code == 202
            assert_listen_refused_and_ping_answered(json.loads(await next_data()))


async def test_an_unknown_method_or_uri_is_repeated_up_to_100_characters(tmp_path: Path) -> None:
    """An error repeats at most 100 characters of what the client sent (a 60 KB method came back whole)."""
    async with raw_stdio(config(tmp_path)) as raw:
        answer = await raw.request(50, "x" * 60_000)
        assert answer["error"] == {"code": -32601, "message": f"Method not found: {'x' * 100}…"}
        modern = await raw.request(51, "y" * 60_000, {"_meta": MODERN_META})
        assert modern["error"]["message"] == f"Method not found: {'y' * 100}…"
        long_key = await raw.request(52, "prompts/get", {"name": "writing__proofread", "arguments": {"k" * 60_000: 1}})
        assert long_key["error"]["code"] == -32602
        assert len(long_key["error"]["message"]) < 300, len(long_key["error"]["message"])
        future = await raw.request(53, "prompts/list", {"_meta": {**MODERN_META, MODERN_META_VERSION: "9" * 100_000}})
        assert future["error"]["code"] == -32022
        assert len(json.dumps(future["error"])) < 500  # (the version was repeated twice: 200 KB)


async def test_a_notification_refused_for_its_params_is_not_answered(tmp_path: Path) -> None:
    """JSON-RPC never answers a notification: one with params nested too deeply, or holding a lone
    surrogate, is logged and dropped (it was answered with an error under id null)."""
    async with raw_stdio(config(tmp_path)) as raw:
        await raw.send(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"x":' + nested(80) + b"}}")
        await raw.send(rb'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"\udfff"}}')
        assert await raw.request(60, "ping") == {"jsonrpc": "2.0", "id": 60, "result": {}}
        bad = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"x":' + nested(80) + b"}}"
        await raw.send(b"[" + bad + b',{"jsonrpc":"2.0","id":61,"method":"ping"}]')  # in a batch neither
        assert await raw.answer_batch() == [{"jsonrpc": "2.0", "id": 61, "result": {}}]


async def test_a_request_nested_past_any_parsers_depth_is_answered_under_its_id(tmp_path: Path) -> None:
    """Unreadable (orjson reads 1,024 levels, the standard library about 1,000), but its id is at its start."""
    async with raw_stdio(config(tmp_path)) as raw:
        await raw.send(
            b'{"jsonrpc":"2.0","id":"req-9","method":"ping","params":{"a":' + b"[" * 3000 + b"]" * 3000 + b"}}"
        )
        answer = await raw.answer()
        assert (answer["id"], answer["error"]["code"]) == ("req-9", -32700), answer
