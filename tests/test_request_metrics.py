"""The request counts and latencies, counted in plain numbers and written when scraped, read as
prometheus-client's own Counter and Histogram would write the same requests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.samples import Sample

from gateway.observability.metrics import LATENCY_BUCKETS, Metrics
from gateway.protocol.errors import UpstreamRejected

observations = st.lists(
    st.tuples(
        st.sampled_from(["prompts/get", "prompts/list", "other"]),
        st.sampled_from(["ok", "-32602", "-32603"]),
        st.sampled_from([0.0, *LATENCY_BUCKETS, 11.0]) | st.floats(min_value=0, max_value=20),
    ),
    max_size=30,
)


def samples(registry: CollectorRegistry) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    """Every sample but the ``_created`` timestamps (the time each series began)."""
    found: list[Sample] = [sample for family in registry.collect() for sample in family.samples]
    return {
        (sample.name, tuple(sorted(sample.labels.items())), round(sample.value, 9))
        for sample in found
        if not sample.name.endswith("_created")
    }


def created_series(registry: CollectorRegistry) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    found = [sample for family in registry.collect() for sample in family.samples]
    return {(s.name, tuple(sorted(s.labels.items()))) for s in found if s.name.endswith("_created")}


@given(observations)
def test_the_scrape_says_what_prometheus_clients_counter_and_histogram_say(seen: list[tuple[str, str, float]]) -> None:
    ours = Metrics()
    theirs = CollectorRegistry()
    requests = Counter(
        "prompt_gateway_requests_total", "Client requests by method and outcome", ["method", "outcome"], registry=theirs
    )
    latency = Histogram(
        "prompt_gateway_request_seconds", "Client request latency by method", ["method"], registry=theirs,
        buckets=LATENCY_BUCKETS,
    )  # fmt: skip
    for method, outcome, seconds in seen:
        ours._observed(method, outcome, seconds)
        requests.labels(method, outcome).inc()
        latency.labels(method).observe(seconds)
    wanted = ("prompt_gateway_requests", "prompt_gateway_request_seconds")
    mine = {sample for sample in samples(ours.registry) if sample[0].startswith(wanted)}
    assert mine == samples(theirs)
    assert {s for s in created_series(ours.registry) if s[0].startswith(wanted)} == created_series(theirs)


@given(st.integers(min_value=-(2**63), max_value=2**63))
def test_an_upstreams_own_error_codes_start_no_series_of_their_own(code: int) -> None:
    """An operator's tester: an upstream answering random codes made a new ``outcome`` series each request.
    The codes the JSON-RPC and MCP specs reserve keep theirs; any other is ``other``."""
    metrics = Metrics()
    with pytest.raises(UpstreamRejected), metrics.observe("prompts/get"):
        raise UpstreamRejected("up", {"code": code, "message": "no"})
    [outcome] = {s.labels["outcome"] for f in metrics.registry.collect() for s in f.samples if "outcome" in s.labels}
    assert outcome == (str(code) if -32768 <= code <= -32000 else "other")
