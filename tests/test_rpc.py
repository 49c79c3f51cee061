import json
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from gateway.protocol.errors import InvalidParams
from gateway.protocol.jsonrpc import Notification, Request
from gateway.rpc import Notify, PeerClosed, RemoteError, RequestTimeout, RpcPeer
from gateway.testing import MemoryFrameStream, memory_frame_pair
from gateway.transports.base import EDGE_BYTES, MessageTooLarge

pytestmark = pytest.mark.anyio
Pair = tuple[MemoryFrameStream, MemoryFrameStream]


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    ours, theirs = memory_frame_pair()
    yield ours, theirs
    await ours.aclose()
    await theirs.aclose()


async def read_json(stream: MemoryFrameStream) -> Any:
    with anyio.fail_after(5):
        return json.loads(await stream.receive())


async def test_requests_are_correlated_by_id_when_answered_out_of_order(pair: Pair) -> None:
    ours, theirs = pair
    peer = RpcPeer(ours)
    results: dict[str, Any] = {}

    async def call(name: str) -> None:
        results[name] = await peer.request("m", {"n": name}, timeout=5)

    async with anyio.create_task_group() as outer:
        outer.start_soon(peer.run)
        async with anyio.create_task_group() as calls:
            calls.start_soon(call, "a")
            calls.start_soon(call, "b")
            first, second = await read_json(theirs), await read_json(theirs)
            await theirs.send(b'{"jsonrpc":"2.0","id":999,"result":{}}')  # unknown id: ignored, not fatal
            for message in (second, first):
                await theirs.send(
                    json.dumps(
                        {"jsonrpc": "2.0", "id": message["id"], "result": {"echo": message["params"]["n"]}}
                    ).encode()
                )
        outer.cancel_scope.cancel()
    assert results == {"a": {"echo": "a"}, "b": {"echo": "b"}}


async def test_error_answers_raise_remote_error(pair: Pair) -> None:
    ours, theirs = pair
    peer = RpcPeer(ours)
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.run)

        async def answer() -> None:
            message = await read_json(theirs)
            await theirs.send(
                json.dumps(
                    {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32602, "message": "nope"}}
                ).encode()
            )

        tg.start_soon(answer)
        with pytest.raises(RemoteError) as info:
            await peer.request("m", None, timeout=5)
        assert info.value.error == {"code": -32602, "message": "nope"}
        tg.cancel_scope.cancel()


async def test_pending_requests_fail_at_once_when_the_peer_goes_away(pair: Pair) -> None:
    ours, theirs = pair
    peer = RpcPeer(ours)
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.run)

        async def hang_up() -> None:
            await read_json(theirs)
            await theirs.aclose()

        tg.start_soon(hang_up)
        with anyio.fail_after(5), pytest.raises(PeerClosed):
            await peer.request("m", None, timeout=3600)
    with pytest.raises(PeerClosed):
        await peer.request("m", None, timeout=1)


async def test_timeout_and_caller_cancellation_send_notifications_cancelled(pair: Pair) -> None:
    ours, theirs = pair
    peer = RpcPeer(ours)
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.run)
        with pytest.raises(RequestTimeout):
            await peer.request("slow", None, timeout=0.01)
        sent = await read_json(theirs)
        cancel = await read_json(theirs)
        assert cancel == {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": sent["id"], "reason": "timed out"},
        }
        with anyio.move_on_after(0.01):
            await peer.request("abandoned", None, timeout=None)
        sent = await read_json(theirs)
        cancel = await read_json(theirs)
        assert cancel["params"] == {"requestId": sent["id"], "reason": "cancelled by the caller"}
        tg.cancel_scope.cancel()


async def test_incoming_requests_run_concurrently_and_can_be_cancelled(pair: Pair) -> None:
    ours, theirs = pair
    started, release = anyio.Event(), anyio.Event()

    async def handle(request: Request, notify: Notify) -> dict[str, Any]:
        if request.method == "block":
            started.set()
            await anyio.sleep_forever()
        if request.method == "bad":
            raise InvalidParams("Invalid params: no")
        if request.method == "crash":
            raise RuntimeError("bug")
        return {"m": request.method}

    notifications: list[Notification] = []

    async def notified(notification: Notification) -> None:
        notifications.append(notification)
        release.set()

    peer = RpcPeer(ours, on_request=handle, on_notification=notified, answer_malformed=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.run)
        await theirs.send(b'{"jsonrpc":"2.0","id":1,"method":"block"}')
        await started.wait()
        await theirs.send(b'{"jsonrpc":"2.0","id":2,"method":"quick"}')  # not stuck behind request 1
        assert await read_json(theirs) == {"jsonrpc": "2.0", "id": 2, "result": {"m": "quick"}}
        await theirs.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}')
        await release.wait()
        await theirs.send(b'{"jsonrpc":"2.0","id":3,"method":"bad"}')
        assert await read_json(theirs) == {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32602, "message": "Invalid params: no"},
        }
        await theirs.send(b'{"jsonrpc":"2.0","id":4,"method":"crash"}')
        assert await read_json(theirs) == {
            "jsonrpc": "2.0",
            "id": 4,
            "error": {"code": -32603, "message": "Internal error"},
        }
        tg.cancel_scope.cancel()
    assert notifications[0].method == "notifications/cancelled"  # request 1 never answered: nothing before id 3


async def test_malformed_frames_and_batches_are_answered(pair: Pair) -> None:
    ours, theirs = pair

    async def handle(request: Request, notify: Notify) -> dict[str, Any]:
        return {"m": request.method}

    peer = RpcPeer(ours, on_request=handle, answer_malformed=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.run)
        await theirs.send(b"{oops")
        assert await read_json(theirs) == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32700,
                "message": "Parse error: not valid JSON: Expecting property name enclosed in double quotes: "
                "line 1 column 2 (char 1)",
            },
        }
        await theirs.send(b'{"jsonrpc":"2.0","id":7,"method":3}')
        answer = await read_json(theirs)
        assert answer["id"] == 7
        assert answer["error"]["code"] == -32600
        await theirs.send(b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},42]')
        batch = await read_json(theirs)
        assert sorted(json.dumps(x, sort_keys=True) for x in batch) == sorted(
            json.dumps(x, sort_keys=True)
            for x in [
                {"jsonrpc": "2.0", "id": 1, "result": {"m": "a"}},
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32600, "message": "Invalid Request: a message must be a JSON object"},
                },
            ]
        )
        tg.cancel_scope.cancel()


async def test_in_flight_requests_are_bounded(pair: Pair) -> None:
    ours, theirs = pair
    gate = anyio.Event()

    async def handle(request: Request, notify: Notify) -> dict[str, Any]:
        await gate.wait()
        return {}

    peer = RpcPeer(ours, on_request=handle, answer_malformed=True, max_in_flight=2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.run)
        for i in range(3):
            await theirs.send(json.dumps({"jsonrpc": "2.0", "id": i, "method": "x"}).encode())
        refused = await read_json(theirs)
        assert refused["id"] == 2
        assert refused["error"]["message"] == "Invalid Request: too many concurrent requests"
        gate.set()
        assert {(await read_json(theirs))["id"], (await read_json(theirs))["id"]} == {0, 1}
        tg.cancel_scope.cancel()


class AnsweringStream:
    """A stream that answers some requests in the call that sends them (as HTTP's JSON answers do):
    ``inline`` decides which; the others go out as frames, as on any stream."""

    def __init__(self, inner: MemoryFrameStream, inline: set[str]) -> None:
        self.inner = inner
        self.inline = inline
        self.send = inner.send
        self.receive = inner.receive
        self.aclose = inner.aclose

    async def exchange(self, frame: bytes, request_id: Any, method: str, params: dict[str, Any] | None) -> bytes | None:
        assert json.loads(frame) == {"jsonrpc": "2.0", "id": request_id, "method": method}
        if method == "broken":
            raise OSError("connection reset")
        if method not in self.inline:
            await self.send(frame)
            return None
        return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"inline": method}}).encode()


async def test_an_exchanging_stream_answers_in_the_call_or_through_receive(pair: Pair) -> None:
    ours, theirs = pair
    peer = RpcPeer(AnsweringStream(ours, inline={"fast"}))
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.run)
        assert await peer.request("fast", None, timeout=5) == {"inline": "fast"}

        async def answer_slow() -> None:
            message = await read_json(theirs)
            await theirs.send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"late": True}}).encode())

        tg.start_soon(answer_slow)
        assert await peer.request("slow", None, timeout=5) == {"late": True}
        with pytest.raises(PeerClosed):
            await peer.request("broken", None, timeout=5)
        assert peer.closed
        tg.cancel_scope.cancel()


async def test_a_batch_in_flight_when_receiving_stops_is_answered_within_the_drain(pair: Pair) -> None:
    """Graceful shutdown drains batches as it drains single requests (a batch used to get no answer)."""
    ours, theirs = pair
    release = anyio.Event()
    started = anyio.Event()

    async def handle(request: Request, notify: Notify) -> dict[str, Any]:
        started.set()
        await release.wait()
        return {"m": request.method}

    peer = RpcPeer(ours, on_request=handle, answer_malformed=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(peer.run, drain_s=30))
        await theirs.send(b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}]')
        await started.wait()
        peer.stop_receiving()
        release.set()
        with anyio.fail_after(10):
            batch = await read_json(theirs)
        assert sorted(item["id"] for item in batch) == [1, 2]
        tg.cancel_scope.cancel()


async def test_requests_still_running_when_the_peer_ends_are_cancelled_before_run_returns(pair: Pair) -> None:
    """The handlers run as tasks of their own: once the stream ends (and the drain is over), each is
    cancelled, and ``run()`` returns only after every one has finished its cleanup."""
    ours, theirs = pair
    started = anyio.Event()
    cleaned: list[int] = []

    async def handle(request: Request, notify: Notify) -> dict[str, Any]:
        try:
            started.set()
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()  # a cleanup that awaits: run() still waits for it
            cleaned.append(request.id)  # type: ignore[arg-type]
        return {}

    peer = RpcPeer(ours, on_request=handle)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.run)
            await theirs.send(b'{"jsonrpc":"2.0","id":1,"method":"block"}')
            await started.wait()
            await theirs.aclose()  # the stream ends: no drain asked for
        assert cleaned == [1]


class _Oversized:
    """A frame stream whose next frame is one too large to read (its edges kept), then the real stream's."""

    def __init__(self, stream: MemoryFrameStream) -> None:
        self._stream = stream
        self.too_large: list[bytes] = []

    async def send(self, frame: bytes) -> None:
        await self._stream.send(frame)

    async def receive(self) -> bytes:
        if self.too_large:
            frame = self.too_large.pop(0)
            raise MessageTooLarge(1024, frame[:EDGE_BYTES], frame[-EDGE_BYTES:])
        return await self._stream.receive()

    async def aclose(self) -> None:
        await self._stream.aclose()


async def test_an_oversized_request_is_not_taken_for_the_answer_to_ours_of_the_same_id(pair: Pair) -> None:
    """Found by a review: the peer's request 1, too large to read, settled our own request 1 (ids run
    apart in each direction) as 'over the size limit', and the peer's request was never answered."""
    ours, theirs = pair
    wrapped = _Oversized(ours)
    peer = RpcPeer(wrapped, answer_malformed=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.run)
        asked = await _started(tg, partial(peer.request, "roots/list", None, timeout=30))
        ours_out = await read_json(theirs)
        padding = "x" * 600
        wrapped.too_large.append(
            json.dumps({"jsonrpc": "2.0", "id": ours_out["id"], "method": "m", "params": {"p": padding}}).encode()
        )
        await theirs.send(b'{"jsonrpc":"2.0","method":"notifications/wake"}')  # (a frame, so receive is called)
        refused = await read_json(theirs)
        assert (refused["id"], refused["error"]["code"]) == (ours_out["id"], -32600)  # their request, answered
        wrapped.too_large.append(
            json.dumps({"jsonrpc": "2.0", "id": ours_out["id"], "result": {"p": padding}}).encode()
        )
        await theirs.send(b'{"jsonrpc":"2.0","method":"notifications/wake"}')
        with pytest.raises(RemoteError, match="over the size limit"):
            await asked()  # our request, failed at once by its oversized answer
        tg.cancel_scope.cancel()


async def _started(tg: anyio.abc.TaskGroup, call: Any) -> Any:
    """Start ``call`` in ``tg``; an awaitable for its outcome (its exception raised)."""
    done = anyio.Event()
    outcome: dict[str, Any] = {}

    async def run() -> None:
        try:
            outcome["value"] = await call()
        except Exception as exc:  # (handed to the waiter)
            outcome["error"] = exc
        done.set()

    tg.start_soon(run)

    async def wait() -> Any:
        await done.wait()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    return wait


async def test_a_request_with_a_meta_of_another_type_is_answered_by_any_peer(pair: Pair) -> None:
    """Found by a review: refused where messages are decoded, such a request from an upstream (whose
    malformed messages go unanswered) was dropped, and the upstream waited out its own time-out."""
    ours, theirs = pair

    async def handle(request: Request, notify: Notify) -> dict[str, Any]:
        return {}

    peer = RpcPeer(ours, on_request=handle)  # an upstream's peer: malformed messages are not answered
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.run)
        await theirs.send(b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"_meta":null}}')
        answer = await read_json(theirs)
        assert (answer["id"], answer["error"]["code"]) == (3, -32602)
        assert answer["error"]["message"] == "Invalid params: params._meta must be an object"
        tg.cancel_scope.cancel()
