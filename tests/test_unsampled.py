"""The edge's sampling answer for a request that carries no trace context (``unsampled.RootDecision``) is
the SDK sampler's: the same trace ids kept, the same dropped, no ``tracestate``, the flags the SDK gives a
span it drops. Sans-IO: the SDK's own sampler asked beside it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind, TraceFlags

from gateway.observability.unsampled import NO_PARENT, EdgeIds, RootDecision

RATIOS = st.one_of(st.sampled_from([0.0, 0.1, 0.5, 1.0]), st.floats(0, 1))
LOW = (1 << 64) - 1


@given(ratio=RATIOS, high=st.integers(0, LOW), low=st.integers(0, LOW), at_the_bound=st.sampled_from([None, -1, 0, 1]))
def test_a_request_with_no_parent_is_kept_or_dropped_as_the_sdk_sampler_decides(
    ratio: float, high: int, low: int, at_the_bound: int | None
) -> None:
    root = TraceIdRatioBased(ratio)
    if at_the_bound is not None:  # the low 64 bits the sampler compares, just under, at and over its bound
        low = min(max(root.bound + at_the_bound, 0), LOW)
    trace_id = (high << 64) | low or 1
    sdk = ParentBased(root).should_sample(NO_PARENT, trace_id, "", SpanKind.SERVER)
    ids = EdgeIds()
    ids.next_trace_id = trace_id  # the id the edge draws next
    dropped = RootDecision(root, ids).dropped()
    if sdk.decision is Decision.DROP:
        assert dropped is not None
        assert dropped.trace_id == trace_id
        assert dropped.trace_state is sdk.trace_state is None
        assert dropped.flags == TraceFlags.DEFAULT | TraceFlags.RANDOM_TRACE_ID  # the SDK's random ids
        assert ids.next_trace_id is None
    else:
        assert dropped is None
        assert ids.next_trace_id == trace_id  # the SDK's span takes it: the sampler answers the same there


def test_a_ratio_of_one_keeps_every_trace_and_of_zero_none() -> None:
    ids = EdgeIds()
    assert all(RootDecision(TraceIdRatioBased(1.0), ids).dropped() is None for _ in range(200))
    assert all(RootDecision(TraceIdRatioBased(0.0), ids).dropped() is not None for _ in range(200))
