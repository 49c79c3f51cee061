"""Hostile answers from an upstream: whatever it writes in answer to a request (lone surrogates, NaN,
non-ASCII digits, requests and notifications of its own first), the gateway's side of the connection
either fails that one request with a clear error or returns a result the gateway can encode as strict
UTF-8 JSON, and keeps serving the next request."""

from __future__ import annotations

import json
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.protocol.jsonrpc import Response, encode
from gateway.rpc import RemoteError, RequestTimeout, RpcPeer
from gateway.testing import memory_frame_pair
from tests.frontend.test_fuzz_frontend import hostile_text, ids, json_values, strict_json

answers = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "result": json_values | st.dictionaries(hostile_text, json_values, max_size=4)}
) | st.fixed_dictionaries(
    {
        "jsonrpc": st.just("2.0"),
        "error": json_values
        | st.fixed_dictionaries(
            {"code": st.integers(-33000, 0), "message": hostile_text}, optional={"data": json_values}
        ),
    }
)
extras = st.lists(
    st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "method": hostile_text | st.sampled_from(["notifications/progress", "roots/list"])},
        optional={"id": ids, "params": json_values | st.dictionaries(hostile_text, json_values, max_size=3)},
    ),
    max_size=3,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extras, answers)
def test_whatever_an_upstream_answers_is_contained_and_encodable(
    before: list[dict[str, Any]], answer: dict[str, Any]
) -> None:
    async def run() -> None:
        ours, theirs = memory_frame_pair()
        peer = RpcPeer(ours)
        outcomes: list[Any] = []
        settled = [anyio.Event(), anyio.Event()]

        async def ask() -> None:
            try:
                outcomes.append(await peer.request("prompts/get", {"name": "x"}, timeout=5))
            except (RemoteError, RequestTimeout) as exc:
                outcomes.append(exc)
            settled[len(outcomes) - 1].set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.run)
            tg.start_soon(ask)
            request = json.loads(await theirs.receive())
            for extra in before:
                await theirs.send(json.dumps(extra).encode())  # escapes lone surrogates, writes NaN
            await theirs.send(json.dumps({**answer, "id": request["id"]}).encode())
            with anyio.fail_after(5):
                async with anyio.create_task_group() as reading:

                    async def read_until_settled() -> None:
                        while True:  # the peer may answer the upstream's own requests
                            strict_json(await theirs.receive())

                    reading.start_soon(read_until_settled)
                    await settled[0].wait()
                    reading.cancel_scope.cancel()
            assert not isinstance(outcomes[0], RequestTimeout), "an answer must settle its request at once"
            if isinstance(outcomes[0], dict):
                strict_json(encode(Response(1, outcomes[0])))
            # the connection serves on
            tg.start_soon(ask)
            while True:
                message = json.loads(await theirs.receive())
                if message.get("method") == "prompts/get":
                    break
            await theirs.send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"ok": 1}}).encode())
            with anyio.fail_after(5):
                await settled[1].wait()
            assert outcomes[1] == {"ok": 1}
            tg.cancel_scope.cancel()
        await ours.aclose()
        await theirs.aclose()

    anyio.run(run)
