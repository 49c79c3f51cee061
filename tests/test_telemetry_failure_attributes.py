"""A failure's ``error.type`` is recorded on its own duration point, and never on what the next request of
the same target records; its made-up prompt name starts no series. In process, with the SDK's in-memory
reader, for a recorded span (every request sampled) and a dropped request."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.config import TelemetrySettings
from gateway.observability.otel import OpenTelemetryTracing
from gateway.observability.tracing import Destination
from gateway.protocol.errors import InvalidParams
from gateway.protocol.jsonrpc import Request

UPSTREAM = Destination("docs", "tcp", "127.0.0.1", 8000, "1.1")


def _points(reader: InMemoryMetricReader, name: str) -> list[dict[str, Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    return [
        {**(point.attributes or {}), "count": point.count}
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
        if isinstance(point, HistogramDataPoint)
    ]


@pytest.mark.anyio  # (a failure's error.type asks anyio which exception is its cancellation)
@pytest.mark.parametrize("ratio", [1.0, 0.0], ids=["recorded", "dropped"])
async def test_a_failure_does_not_change_what_the_next_request_of_its_target_records(ratio: float) -> None:
    reader = InMemoryMetricReader()
    settings = TelemetrySettings(enabled=True, sample_ratio=ratio)
    traced = OpenTelemetryTracing(settings, span_exporter=InMemorySpanExporter(), metric_reader=reader)
    try:
        for request_id, fails in ((1, True), (2, False), (3, False)):
            request = Request(request_id, "prompts/get", {"name": "docs__review"})
            with (
                pytest.raises(InvalidParams) if fails else nullcontext(),
                traced.server(request, mcp_version="2025-11-25", session_id=None),
            ):
                with (
                    pytest.raises(InvalidParams) if fails else nullcontext(),
                    traced.client("prompts/get", {"name": "review"}, to=UPSTREAM, mcp_version="2025-11-25"),
                ):
                    if fails:
                        raise InvalidParams("Invalid params: arguments.topic: Field required")
                if fails:
                    raise InvalidParams("Invalid params: arguments.topic: Field required")
        server = _points(reader, "mcp.server.operation.duration")
        client = _points(reader, "mcp.client.operation.duration")
    finally:
        traced.shutdown()
    failed_server = [p for p in server if "error.type" in p]
    assert [p["count"] for p in failed_server] == [1]
    assert "gen_ai.prompt.name" not in failed_server[0]  # a made-up name would start a series
    assert [(p["count"], p["gen_ai.prompt.name"]) for p in server if "error.type" not in p] == [(2, "docs__review")]
    failed_client = [p for p in client if "error.type" in p]
    assert [p["count"] for p in failed_client] == [1]
    assert [(p["count"], p["server.address"]) for p in client if "error.type" not in p] == [(2, "127.0.0.1")]
