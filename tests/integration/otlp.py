"""A real OTLP/HTTP endpoint for the tests: an aiohttp server taking what an OpenTelemetry SDK exports
(``/v1/traces``, ``/v1/metrics``, protobuf) and decoding it with ``opentelemetry-proto``, as a collector
would. Tests await what they expect to arrive instead of sleeping."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from aiohttp import web
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind is not None else None


@dataclass
class ReceivedSpan:
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    status_code: int
    status_message: str
    links: list[tuple[str, str]]
    service: str | None

    @property
    def kind_name(self) -> str:
        return Span.SpanKind.Name(self.kind).removeprefix("SPAN_KIND_")


@dataclass
class Collector:
    url: str
    spans: list[ReceivedSpan] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)  # name -> the last data point's metric message
    exemplars: set[tuple[str, str, str]] = field(default_factory=set)  # (metric, trace id, span id), every export
    _arrived: anyio.Event = field(default_factory=anyio.Event)

    def _notify(self) -> None:
        self._arrived.set()
        self._arrived = anyio.Event()

    async def wait_for(self, found: Callable[[Collector], Any], timeout: float = 20) -> Any:
        """What ``found`` returns once it returns something truthy, as exports arrive."""
        with anyio.fail_after(timeout):
            while True:
                arrived = self._arrived
                result = found(self)
                if result:
                    return result
                await arrived.wait()

    def span(self, name: str, kind: str) -> ReceivedSpan | None:
        return next((s for s in self.spans if s.name == name and s.kind_name == kind), None)


def _body(request_body: bytes, encoding: str | None) -> bytes:
    return gzip.decompress(request_body) if encoding == "gzip" else request_body


@asynccontextmanager
async def otlp_collector() -> AsyncIterator[Collector]:
    collector: Collector | None = None

    async def traces(request: web.Request) -> web.Response:
        assert collector is not None
        message = ExportTraceServiceRequest()
        message.ParseFromString(_body(await request.read(), request.headers.get("Content-Encoding")))
        for resource_spans in message.resource_spans:
            resource = {a.key: value_of(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    collector.spans.append(
                        ReceivedSpan(
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes={a.key: value_of(a.value) for a in span.attributes},
                            status_code=span.status.code,
                            status_message=span.status.message,
                            links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                            service=resource.get("service.name"),
                        )
                    )
        collector._notify()
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(), content_type="application/x-protobuf"
        )

    async def metrics(request: web.Request) -> web.Response:
        assert collector is not None
        message = ExportMetricsServiceRequest()
        message.ParseFromString(_body(await request.read(), request.headers.get("Content-Encoding")))
        for resource_metrics in message.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    collector.metrics[metric.name] = metric
                    collector.exemplars.update(
                        (metric.name, exemplar.trace_id.hex(), exemplar.span_id.hex())
                        for point in metric.histogram.data_points
                        for exemplar in point.exemplars
                    )
        collector._notify()
        return web.Response(
            body=ExportMetricsServiceResponse().SerializeToString(), content_type="application/x-protobuf"
        )

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    app.router.add_post("/v1/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    collector = Collector(f"http://127.0.0.1:{port}")
    try:
        yield collector
    finally:
        await runner.cleanup()
