"""The stdio front end fed raw bytes, as a buggy or hostile client would send them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as t
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.integration.helpers import ROOT, demo_upstream, gateway_command, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


class Wire:
    def __init__(self, process: Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = BufferedByteReceiveStream(process.stdout)

    async def send_raw(self, data: bytes) -> None:
        await self._stdin.send(data + b"\n")

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(message).encode())

    async def receive(self) -> Any:
        with anyio.fail_after(10):
            return json.loads(await self._stdout.receive_until(b"\n", 10 * 1024 * 1024))

    async def call(self, id_: int, method: str, params: dict[str, Any] | None = None) -> Any:
        await self.send({"jsonrpc": "2.0", "id": id_, "method": method, **({"params": params} if params else {})})
        return await self.receive()


def initialize(version: str = "2025-11-25") -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


@pytest.fixture
async def wire(tmp_path: Path) -> AsyncIterator[Wire]:
    config = write_config(
        tmp_path / "c.toml", [demo_upstream("writing", "writing")], gateway={"max_message_bytes": 4096}
    )
    async with await anyio.open_process(gateway_command(config, "serve"), cwd=ROOT) as process:
        yield Wire(process)
        process.terminate()


@pytest.fixture
async def bare_wire(tmp_path: Path) -> AsyncIterator[Wire]:
    """A gateway with no upstream: negotiation needs none, and each version needs a connection of its own."""
    config = write_config(tmp_path / "c.toml", [])
    async with await anyio.open_process(gateway_command(config, "serve"), cwd=ROOT) as process:
        yield Wire(process)


@pytest.mark.parametrize(
    ("requested", "answered"),
    [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ],
)
async def test_version_negotiation(bare_wire: Wire, requested: str, answered: str) -> None:
    answer = await bare_wire.call(1, "initialize", initialize(requested))
    result = t.InitializeResult.model_validate(answer["result"])
    assert result.protocol_version == answered
    assert result.capabilities.prompts is not None
    assert result.capabilities.prompts.list_changed is True


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"protocolVersion": 5, "capabilities": {}, "clientInfo": {"name": "c"}}, "params.protocolVersion"),
        ({}, "params.protocolVersion"),
        (None, "params.protocolVersion"),
        ({"protocolVersion": "2025-11-25", "capabilities": [], "clientInfo": {"name": "c"}}, "params.capabilities"),
        ({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": "me"}, "params.clientInfo"),
        (
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"version": "1"}},
            "params.clientInfo.name",
        ),
    ],
)
async def test_an_initialize_of_the_wrong_shape_is_refused_naming_the_field(
    bare_wire: Wire, params: dict[str, Any] | None, named: str
) -> None:
    """Found by a tester: each of these began a session (a number for the version, a list for the
    capabilities, no params at all); the official SDK's server refuses them."""
    refused = await bare_wire.call(1, "initialize", params)
    assert refused["error"]["code"] == -32602, refused
    assert refused["error"]["message"].startswith(f"Invalid params: {named}"), refused
    assert "result" in await bare_wire.call(2, "initialize", initialize())  # no session began: one can now


async def test_lifecycle_errors(wire: Wire) -> None:
    assert (await wire.call(1, "ping"))["result"] == {}  # ping is allowed before initialize
    early = await wire.call(2, "prompts/list")
    assert early["error"] == {"code": -32600, "message": "Invalid Request: prompts/list before initialize"}
    await wire.call(3, "initialize", initialize())
    await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    again = await wire.call(4, "initialize", initialize())
    assert again["error"]["code"] == -32600
    listing = t.ListPromptsResult.model_validate((await wire.call(5, "prompts/list"))["result"])
    assert [p.name for p in listing.prompts] == ["writing__summarize", "writing__translate", "writing__proofread"]


MALFORMED: list[tuple[bytes, dict[str, Any]]] = [
    (b"{oops", {"id": None, "code": -32700}),
    (b"\xff\xfe\xfd", {"id": None, "code": -32700}),
    (b"[" * 4000, {"id": None, "code": -32700}),  # deep nesting within the size bound
    (b'{"jsonrpc":"2.0","id":5,"method":3}', {"id": 5, "code": -32600}),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', {"id": None, "code": -32600}),
    (b'{"jsonrpc":"2.0","id":6,"method":"tools/list"}', {"id": 6, "code": -32601}),
    (b'{"jsonrpc":"2.0","id":7,"method":"no/such/method"}', {"id": 7, "code": -32601}),
    (b'{"jsonrpc":"2.0","id":8,"method":"prompts/get","params":{"name":7}}', {"id": 8, "code": -32602}),
    (
        b'{"jsonrpc":"2.0","id":9,"method":"prompts/get","params":{"name":"writing__summarize",'
        b'"arguments":{"text":["not","a","string"]}}}',
        {"id": 9, "code": -32602},
    ),
    (b'{"jsonrpc":"2.0","id":10,"method":"prompts/list","params":{"cursor":"forged"}}', {"id": 10, "code": -32602}),
    # _meta of another type was served, and relayed upstream as it came
    (
        b'{"jsonrpc":"2.0","id":13,"method":"prompts/get","params":{"name":"x","_meta":"str"}}',
        {"id": 13, "code": -32602},
    ),
    (b'{"jsonrpc":"2.0","id":14,"method":"prompts/list","params":{"_meta":null}}', {"id": 14, "code": -32602}),
    (
        b'{"jsonrpc":"2.0","id":15,"method":"prompts/list","params":{"_meta":{"progressToken":[1]}}}',
        {"id": 15, "code": -32602},
    ),
    (
        b'{"jsonrpc":"2.0","id":11,"method":"prompts/get","params":{"name":"' + b"x" * 8000 + b'"}}',
        {"id": 11, "code": -32600},
    ),  # over max_message_bytes: skipped whole, answered by the id its start gives (it was null: the client waited)
    (
        b'{"method":"prompts/get","params":{"name":"' + b"x" * 8000 + b'"},"jsonrpc":"2.0","id":"last"}',
        {"id": "last", "code": -32600},
    ),  # the TypeScript SDK's order: the id at its end
    (
        b'{"jsonrpc":"2.0","method":"x","params":{"name":"' + b"x" * 8000 + b'","id":12}}',
        {"id": None, "code": -32600},
    ),  # an "id" nested at its end is not the message's
]


async def test_malformed_input_gets_a_well_formed_error_and_the_gateway_keeps_serving(wire: Wire) -> None:
    """Every kind of malformed input, one after another on one connection: each gets a well-formed error
    and the next request is still served."""
    await wire.call(1, "initialize", initialize())
    for raw, expected in MALFORMED:
        await wire.send_raw(raw)
        answer = await wire.receive()
        assert answer["jsonrpc"] == "2.0", raw[:80]
        assert answer["id"] == expected["id"], raw[:80]
        assert answer["error"]["code"] == expected["code"], raw[:80]
        assert isinstance(answer["error"]["message"], str)
        assert answer["error"]["message"]
        assert (await wire.call(99, "ping"))["result"] == {}


async def test_batches_are_answered_as_arrays(wire: Wire) -> None:
    await wire.call(1, "initialize", initialize("2025-03-26"))
    await wire.send(
        [
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},  # type: ignore[arg-type]
            {"jsonrpc": "2.0", "id": 3, "method": "nope"},
        ]
    )
    answers = {a["id"]: a for a in await wire.receive()}
    assert answers[2]["result"] == {}
    assert answers[3]["error"]["code"] == -32601
