"""The floor of tracing with the OpenTelemetry SDK: what the SDK alone costs for what the gateway records of
one relayed ``prompts/get`` (a SERVER and a CLIENT span with the conventions' attributes, the context
injected for the upstream, both operation-duration histograms), exported over OTLP/HTTP as the gateway
exports them. No gateway code runs: this is the least a gateway tracing through the SDK could add.

Usage: ``python -m bench.otel_floor OTLP_BASE_URL REQUESTS``; prints ``{"cpu_us_per_request": …}``. The
CPU is the whole process's (the export thread's encoding included), with every span exported (the
queue is sized so that none is dropped).
"""

from __future__ import annotations

import json
import sys
import time

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
SERVER_METRIC: dict[str, str | int] = {
    "mcp.method.name": "prompts/get",
    "gen_ai.prompt.name": "up__p00001",
    "mcp.protocol.version": "2026-07-28",
    "network.transport": "tcp",
    "network.protocol.name": "http",
    "network.protocol.version": "1.1",
}
"""The attributes the gateway's SERVER span and server histogram carry for a relayed ``prompts/get``."""
CLIENT_METRIC: dict[str, str | int] = {
    "mcp.method.name": "prompts/get",
    "gen_ai.prompt.name": "p00001",
    "mcp.protocol.version": "2026-07-28",
    "network.transport": "tcp",
    "network.protocol.name": "http",
    "server.address": "127.0.0.1",
    "server.port": 8000,
}
"""Those of its CLIENT span and client histogram."""


def main() -> None:
    base, requests = sys.argv[1].rstrip("/"), int(sys.argv[2])
    resource = Resource.create({"service.name": "mcp-prompt-gateway"})
    traces = TracerProvider(resource=resource, shutdown_on_exit=False)
    traces.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/v1/traces"), max_queue_size=2 * requests + 1024)
    )
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{base}/v1/metrics"))
    meters = MeterProvider(metric_readers=[reader], resource=resource, shutdown_on_exit=False)
    meter = meters.get_meter("floor")
    server_duration = meter.create_histogram(
        "mcp.server.operation.duration", unit="s", explicit_bucket_boundaries_advisory=BUCKETS
    )
    client_duration = meter.create_histogram(
        "mcp.client.operation.duration", unit="s", explicit_bucket_boundaries_advisory=BUCKETS
    )
    tracer = traces.get_tracer("floor")
    propagator = TraceContextTextMapPropagator()
    started = time.process_time()
    for request_id in range(requests):
        began = time.perf_counter()
        server_attributes = {**SERVER_METRIC, "jsonrpc.request.id": str(request_id), "client.address": "127.0.0.1"}
        server = tracer.start_span("prompts/get up__p00001", None, SpanKind.SERVER, server_attributes)
        within = trace.set_span_in_context(server)
        client = tracer.start_span(
            "prompts/get p00001", within, SpanKind.CLIENT, {**CLIENT_METRIC, "prompt_gateway.upstream": "up"}
        )
        carrier: dict[str, str] = {}
        propagator.inject(carrier, trace.set_span_in_context(client))
        client.set_attribute("jsonrpc.request.id", str(request_id))
        client.end()
        client_duration.record(time.perf_counter() - began, CLIENT_METRIC)
        server.end()
        server_duration.record(time.perf_counter() - began, SERVER_METRIC)
    traces.force_flush()
    meters.force_flush()
    cpu_us = (time.process_time() - started) * 1e6 / requests
    traces.shutdown()
    meters.shutdown()
    print(json.dumps({"cpu_us_per_request": cpu_us}), flush=True)


if __name__ == "__main__":
    main()
