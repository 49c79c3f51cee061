"""W3C trace context read from and written into MCP messages (sans-IO)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.protocol.trace_context import MAX_VALUE_CHARS, TRACE_KEYS, carried, with_trace

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
anything = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=9000),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
metas = st.dictionaries(st.sampled_from([*TRACE_KEYS, "progressToken", "x"]), anything | st.just(TRACEPARENT))


@given(st.none() | anything | st.fixed_dictionaries({}, optional={"_meta": anything | metas, "name": anything}))
def test_only_bounded_printable_ascii_strings_are_carried_on(params: Any) -> None:
    """What goes into an upstream request and its HTTP headers: never a line break, a control character,
    a non-string or an unbounded value, whatever the client put in ``_meta``."""
    for key, value in carried(params).items():
        assert key in TRACE_KEYS
        assert isinstance(value, str)
        assert 0 < len(value) <= MAX_VALUE_CHARS[key]
        assert value.isascii()
        assert value.isprintable()  # no CR, LF or other control characters


def test_the_gateway_context_replaces_the_clients_and_keeps_the_rest() -> None:
    params = {"name": "p", "_meta": {"traceparent": TRACEPARENT, "progressToken": 7, "baggage": "a=1"}}
    ours = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01", "baggage": "a=1"}
    sent = with_trace(params, ours)
    assert sent == {"name": "p", "_meta": {"progressToken": 7, **ours}}
    assert params["_meta"]["traceparent"] == TRACEPARENT  # the client's request is not changed
    assert with_trace(None, ours) == {"_meta": ours}
    assert with_trace(params, {}) is params  # not tracing: nothing changes
    assert carried(sent) == ours
