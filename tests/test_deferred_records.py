"""Duration records handed to the SDK in batches (``deferred_records.py``): nothing is lost, counted twice or
read late by a collection, and an exemplar still names the span that was current when the request ended.
In process, with the SDK's own meter provider and in-memory reader."""

from __future__ import annotations

import asyncio
import threading

import anyio
import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from gateway.observability import deferred_records
from gateway.observability.deferred_records import BATCH, DeferredHistogram, DeferredRecords

ATTRIBUTES = {"mcp.method.name": "prompts/get", "gen_ai.prompt.name": "docs__review"}


def _deferred() -> tuple[InMemoryMetricReader, DeferredRecords, DeferredHistogram]:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    records = DeferredRecords(meter)
    return reader, records, records.histogram(meter.create_histogram("mcp.server.operation.duration", unit="s"))


def _points(reader: InMemoryMetricReader) -> list[HistogramDataPoint]:
    data = reader.get_metrics_data()
    assert data is not None
    return [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        for point in metric.data.data_points
        if isinstance(point, HistogramDataPoint)
    ]


def _names(reader: InMemoryMetricReader) -> set[str]:
    data = reader.get_metrics_data()
    assert data is not None
    return {m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}


@pytest.mark.anyio
async def test_a_collection_reads_every_record_made_before_it_at_once() -> None:
    reader, records, histogram = _deferred()
    for amount in (0.01, 0.02, 0.03):
        histogram.record(amount, ATTRIBUTES)
    assert records.waiting == 3  # fewer than a batch, and the second has not passed
    [point] = _points(reader)
    assert (point.count, round(point.sum, 6), dict(point.attributes or {})) == (3, 0.06, ATTRIBUTES)
    assert records.waiting == 0
    assert _names(reader) == {"mcp.server.operation.duration"}  # the collection hook exports nothing of its own


@pytest.mark.anyio
async def test_a_full_batch_is_handed_on_in_the_event_loops_next_turn() -> None:
    reader, records, histogram = _deferred()
    for _ in range(BATCH):
        histogram.record(0.01, ATTRIBUTES)
    assert records.waiting == BATCH
    await asyncio.sleep(0)  # one turn of the loop: the hand-on was scheduled with call_soon
    assert records.waiting == 0
    [point] = _points(reader)
    assert point.count == BATCH


@pytest.mark.anyio
async def test_a_lone_record_is_handed_on_after_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deferred_records, "MAX_WAIT_S", 0.01)
    _, records, histogram = _deferred()
    histogram.record(0.01, ATTRIBUTES)
    assert records.waiting == 1
    with anyio.fail_after(10):
        while records.waiting:
            await anyio.sleep(0.005)


def test_without_an_event_loop_a_record_is_handed_on_at_once() -> None:
    reader, records, histogram = _deferred()
    histogram.record(0.5, ATTRIBUTES)
    assert records.waiting == 0
    assert _points(reader)[0].count == 1


@pytest.mark.anyio
async def test_a_scheduled_hand_on_takes_everything_and_the_other_timer_with_it() -> None:
    _, records, histogram = _deferred()
    histogram.record(0.01, ATTRIBUTES)  # the second's timer
    for _ in range(BATCH):
        histogram.record(0.01, ATTRIBUTES)  # and the batch's
    await asyncio.sleep(0)
    assert records.waiting == 0
    assert records.scheduled is False


def test_drain_from_another_thread_leaves_the_loops_timers_alone() -> None:
    """``shutdown`` runs in a worker thread (``to_thread``): it hands records on without touching the loop."""

    async def main() -> None:
        _, records, histogram = _deferred()
        histogram.record(0.01, ATTRIBUTES)
        await anyio.to_thread.run_sync(records.drain)
        assert (records.waiting, records.scheduled) == (0, True)  # the timer runs later and finds nothing

    anyio.run(main)


@pytest.mark.anyio
async def test_an_exemplar_names_the_span_of_the_context_recorded_with() -> None:
    """The SDK's trace-based filter keeps an exemplar for a sampled span: the one current when ``record``
    was called, not whatever is current when the batch is handed on."""
    reader, _, histogram = _deferred()
    tracer = TracerProvider().get_tracer("test")
    span = tracer.start_span("prompts/get docs__review")
    context = trace.set_span_in_context(span)
    histogram.record(0.01, ATTRIBUTES, context)
    span.end()
    histogram.record(0.02, ATTRIBUTES)  # no span current: no exemplar
    [point] = _points(reader)
    assert point.count == 2
    [exemplar] = point.exemplars
    assert (exemplar.trace_id, exemplar.span_id) == (span.get_span_context().trace_id, span.get_span_context().span_id)
    assert exemplar.value == 0.01


@pytest.mark.anyio
async def test_a_record_made_with_no_span_gets_no_exemplar_from_the_context_it_is_handed_on_in() -> None:
    """A dropped request records with an empty context (no span). Handed on later by a timer whose
    context was copied from a sampled request, the SDK (``context or get_current()``) took that
    request's span: a reviewer saw a dropped 30 ms request's point carry another trace's exemplar."""
    reader, records, histogram = _deferred()
    span = TracerProvider().get_tracer("test").start_span("prompts/get docs__review")
    histogram.record(0.03, ATTRIBUTES, otel_context.Context())  # a dropped request's (unsampled.NO_PARENT)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        records.drain()  # as a timer scheduled from within the sampled request would
    finally:
        otel_context.detach(token)
    [point] = _points(reader)
    assert point.count == 1
    assert list(point.exemplars) == []


@pytest.mark.anyio
async def test_a_reader_collecting_on_its_own_thread_loses_and_doubles_nothing() -> None:
    """A periodic reader collects on its thread while the loop records: each record counted exactly once."""
    reader, records, histogram = _deferred()
    total = 20_000
    stop = threading.Event()
    collections = 0

    def collect() -> None:
        nonlocal collections
        while not stop.is_set():
            reader.get_metrics_data()  # (cumulative: the last collection counts everything)
            collections += 1

    reader_thread = threading.Thread(target=collect)
    reader_thread.start()
    try:
        for n in range(total):
            histogram.record(0.001, ATTRIBUTES)
            if n % 500 == 0:
                await asyncio.sleep(0)
    finally:
        stop.set()
        reader_thread.join()
    records.drain()
    assert collections > 1
    assert sum(p.count for p in _points(reader)) == total
