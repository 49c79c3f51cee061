"""The floor of tracing in a server: the bare relay (``bench/relay.py``) with the OpenTelemetry SDK doing,
around every relayed request, what the gateway asks of it: a SERVER span and a CLIENT span with the
conventions' attributes, the CLIENT span's context sent upstream as a ``traceparent`` header, both
operation-duration histograms, spans and metrics exported over OTLP/HTTP as the gateway exports them,
with the sampler ``sample_ratio`` makes. The SDK is used plainly, as its documentation shows (a dropped
span is the SDK's non-recording one).

``bench/otel_floor.py`` prices the same SDK work in a loop, where every cache stays warm; here it runs
where the gateway's runs, between a client and an upstream on the same cores, which is what the
telemetry section's targets compare the gateway with.

Usage: ``python -m bench.traced_relay UPSTREAM_URL OTLP_BASE_URL SAMPLE_RATIO METRICS`` (METRICS: ``true``
or ``false``); prints its port first.
"""

from __future__ import annotations

import itertools
import sys
import time

from opentelemetry import context, trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from bench.otel_floor import BUCKETS, CLIENT_METRIC, SERVER_METRIC
from bench.relay import Relay, serve


class TracedRelay(Relay):
    """The bare relay, each POST a SERVER span around a CLIENT span, each with its duration recorded."""

    def __init__(self, upstream: str, otlp: str, ratio: float, metrics: bool) -> None:
        super().__init__(upstream)
        resource = Resource.create({"service.name": "mcp-prompt-gateway"})
        self._traces = TracerProvider(
            sampler=ParentBased(TraceIdRatioBased(ratio)), resource=resource, shutdown_on_exit=False
        )
        self._traces.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{otlp}/v1/traces")))
        readers: list[MetricReader] = []
        if metrics:
            readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{otlp}/v1/metrics")))
        meter = MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False).get_meter("relay")
        self._metrics = metrics
        self._server_duration = meter.create_histogram(
            "mcp.server.operation.duration", unit="s", explicit_bucket_boundaries_advisory=BUCKETS
        )
        self._client_duration = meter.create_histogram(
            "mcp.client.operation.duration", unit="s", explicit_bucket_boundaries_advisory=BUCKETS
        )
        self._tracer = self._traces.get_tracer("relay")
        self._propagator = TraceContextTextMapPropagator()
        self._ids = itertools.count()

    async def ask(self, body: bytes, headers: dict[str, str]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        began = time.perf_counter()
        request_id = str(next(self._ids))
        on_server = {**SERVER_METRIC, "jsonrpc.request.id": request_id, "client.address": "127.0.0.1"}
        server = self._tracer.start_span("prompts/get up__p00001", None, SpanKind.SERVER, on_server)
        token = context.attach(trace.set_span_in_context(server))
        try:
            client = self._tracer.start_span(
                "prompts/get p00001", None, SpanKind.CLIENT, {**CLIENT_METRIC, "prompt_gateway.upstream": "up"}
            )
            sent = time.perf_counter()
            carrier: dict[str, str] = {}
            self._propagator.inject(carrier, trace.set_span_in_context(client))
            client.set_attribute("jsonrpc.request.id", request_id)
            try:
                return await super().ask(body, {**headers, **carrier})
            finally:
                client.end()
                if self._metrics:
                    self._client_duration.record(time.perf_counter() - sent, CLIENT_METRIC)
        finally:
            server.end()
            if self._metrics:
                self._server_duration.record(time.perf_counter() - began, SERVER_METRIC)
            context.detach(token)


def main() -> None:
    upstream, otlp, ratio, metrics = sys.argv[1], sys.argv[2].rstrip("/"), float(sys.argv[3]), sys.argv[4]
    serve(TracedRelay(upstream, otlp, ratio, metrics == "true"))


if __name__ == "__main__":
    main()
