"""The id of a message too large to read is found from its first and last bytes alone, in either order of
members the SDKs write, whatever the message holds, with whether it is a request or a response (ids run
apart in each direction); an "id" nested anywhere is never taken for its own."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.protocol.jsonrpc import id_at_edges
from gateway.transports.base import EDGE_BYTES

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["id", "a", "x"]), inner, max_size=3),
    max_leaves=20,
)
ids = st.integers(-(10**15), 10**15) | st.text(max_size=40)
padding = st.integers(0, 3 * EDGE_BYTES)


def edges(message: dict[str, Any], pad: int) -> tuple[bytes, bytes]:
    frame = json.dumps(message, ensure_ascii=False).encode()
    return frame[:EDGE_BYTES], frame[-EDGE_BYTES:]


kinds = st.sampled_from([("result", "response"), ("error", "response"), ("method", "request")])


@given(ids, json_values, padding, kinds)
def test_the_id_first_as_the_python_sdk_writes_it(request_id: Any, value: Any, pad: int, kind: Any) -> None:
    key, expected = kind
    message = {"jsonrpc": "2.0", "id": request_id, key: {"pad": "x" * pad, "value": value}}
    assert id_at_edges(*edges(message, pad)) == (request_id, expected)


@given(ids, json_values, padding, kinds)
def test_the_id_last_as_the_typescript_sdk_writes_it(request_id: Any, value: Any, pad: int, kind: Any) -> None:
    key, expected = kind
    message = {key: {"value": value, "pad": "x" * pad}, "jsonrpc": "2.0", "id": request_id}
    assert id_at_edges(*edges(message, pad)) == (request_id, expected)


def test_a_number_is_read_whole_or_not_at_all() -> None:
    """An id of more digits than the pattern reads, or not an integer, was read as its first 18 digits
    (or up to its point): another request's id."""
    for raw in (b"12345678901234567890", b"1.5", b"7e3"):
        frame = b'{"jsonrpc":"2.0","id":' + raw + b',"result":{"x":"' + b"x" * 600 + b'"}}'
        assert id_at_edges(frame[:EDGE_BYTES], frame[-EDGE_BYTES:]) is None, raw


@given(json_values, padding, st.sampled_from(["first", "last"]))
def test_an_id_nested_anywhere_is_not_the_messages(params: Any, pad: int, where: str) -> None:
    nested = {"pad": "x" * pad, "id": 7, "value": params} if where == "first" else {"value": params, "id": 7}
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": nested}
    assert id_at_edges(*edges(message, pad)) is None


@given(st.binary(max_size=EDGE_BYTES), st.binary(max_size=EDGE_BYTES))
def test_any_bytes_give_an_id_that_can_be_written_back_or_none_and_never_raise(head: bytes, tail: bytes) -> None:
    """A reviewer's 413s answered 500: an id that is not UTF-8, a bad escape, a lone surrogate."""
    found = id_at_edges(b'{"jsonrpc":"2.0","id":' + head, tail + b"}")
    if found is not None:
        json.dumps(found[0], ensure_ascii=False).encode()


def test_ids_that_cannot_be_answered_under_are_none() -> None:
    for raw in (b'"caf\xe9"', b'"\\q"', b'"\\ud800"'):
        assert id_at_edges(b'{"jsonrpc":"2.0","id":' + raw + b',"method":"x","params":{"a":"', b"") is None, raw
