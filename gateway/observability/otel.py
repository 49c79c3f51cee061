"""Tracing by the OpenTelemetry SDK, exported over OTLP/HTTP: imported only when ``[telemetry] enabled``.

Spans and metrics follow the OpenTelemetry semantic conventions for MCP: span names
``{mcp.method.name} {target}``, SERVER spans parented by the context in ``params._meta`` (the HTTP
request's ``traceparent`` is linked, or the parent when ``_meta`` carries none), CLIENT spans whose
context goes out in the upstream request's ``_meta`` (and as HTTP headers), ``error.type`` and
``rpc.response.status_code`` as the JSON-RPC error code, the duration histograms in seconds with the
conventions' bucket boundaries. The exporter, sampler and resource read the standard ``OTEL_*``
environment variables; what ``[telemetry]`` sets wins over them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, TraceIdRatioBased
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.config import TelemetrySettings
from gateway.observability.deferred_records import DeferredRecords
from gateway.observability.failures import failed, failed_metric
from gateway.observability.tracing import (
    NO_TRACE,
    RECEIVED_OVER,
    Arrival,
    ClientSpan,
    Destination,
    resource_of,
    session_label,
    target_of,
)
from gateway.observability.unsampled import (
    DROPPED,
    NO_PARENT,
    Dropped,
    DroppedClient,
    DroppedServer,
    EdgeIds,
    RootDecision,
    decided_at_the_edge,
    dropped_flags,
)
from gateway.protocol.jsonrpc import Request, RequestId
from gateway.protocol.trace_context import carried, with_trace

DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
"""The conventions' ``ExplicitBucketBoundaries`` for every MCP duration histogram."""
SCOPE = "mcp-prompt-gateway"
DEFAULT_SERVICE_NAME = "mcp-prompt-gateway"
UPSTREAM_ATTRIBUTE = "prompt_gateway.upstream"
"""The upstream a CLIENT span goes to, by its namespace (the gateway's own attribute)."""
RESOURCE_URI = "mcp.resource.uri"

_log = structlog.get_logger("gateway.telemetry")
_PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])


def _resource(settings: TelemetrySettings) -> Resource:
    resource = Resource.create({SERVICE_NAME: settings.service_name} if settings.service_name else {})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return resource


def _endpoint(settings: TelemetrySettings, signal: str) -> str | None:
    """``[telemetry] endpoint`` is the OTLP/HTTP base URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` is (the
    exporters read that and the per-signal variables themselves when it is not set)."""
    if settings.endpoint is None:
        return None
    return settings.endpoint.rstrip("/") + f"/v1/{signal}"


def _network_attributes(arrival: Arrival | None) -> dict[str, str | int]:
    """The transport a request came over (``network.*``): on its span, and on its metrics."""
    if arrival is None:
        return {}
    attributes: dict[str, str | int] = {"network.transport": arrival.transport}
    if arrival.protocol is not None:
        attributes["network.protocol.name"] = arrival.protocol
    if arrival.protocol_version is not None:
        attributes["network.protocol.version"] = arrival.protocol_version
    return attributes


def _arrival_attributes(arrival: Arrival | None) -> dict[str, str | int]:
    """The transport and the client's address (``client.*``: on the span only, never a metric's)."""
    attributes = _network_attributes(arrival)
    if arrival is not None and arrival.address is not None:
        attributes["client.address"] = arrival.address
        if arrival.port is not None:
            attributes["client.port"] = arrival.port
    return attributes


def _target_attributes(method: str, params: Mapping[str, Any] | None) -> tuple[str, dict[str, str | int]]:
    """The span's name and the attributes naming its target (a new dict: the caller's to fill in)."""
    prompt, tool = target_of(method, params)
    attributes: dict[str, str | int] = {"mcp.method.name": method}
    if prompt is not None:
        attributes["gen_ai.prompt.name"] = prompt
    if tool is not None:
        attributes["gen_ai.tool.name"] = tool
        attributes["gen_ai.operation.name"] = "execute_tool"
    target = prompt or tool
    return (f"{method} {target}" if target else method), attributes


class _SentSpan:
    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def inject(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)  # the current context: this span, and the baggage that came in
        return with_trace(params, carrier)

    def sent(self, request_id: RequestId) -> None:
        self._span.set_attribute("jsonrpc.request.id", str(request_id))


class OpenTelemetryTracing:
    enabled = True

    def __init__(
        self,
        settings: TelemetrySettings,
        *,
        span_exporter: SpanExporter | None = None,
        metric_reader: MetricReader | None = None,
    ) -> None:
        """Exporting over OTLP/HTTP, or to ``span_exporter`` and ``metric_reader`` where given (the SDK's
        in-memory ones, for tests that read what would have been sent)."""
        resource = _resource(settings)
        self._verbatim = settings.upstream_error_messages
        root = TraceIdRatioBased(settings.sample_ratio) if settings.sample_ratio is not None else None
        self._ids = EdgeIds()
        self._traces = TracerProvider(
            sampler=ParentBased(root) if root is not None else None,
            resource=resource,
            shutdown_on_exit=False,
            id_generator=self._ids,
        )
        self._sampler: Sampler | None = self._traces.sampler if decided_at_the_edge(self._traces.sampler) else None
        self._without_parent = RootDecision(root, self._ids) if root is not None else None
        exporter = span_exporter or OTLPSpanExporter(endpoint=_endpoint(settings, "traces"))
        self._traces.add_span_processor(BatchSpanProcessor(exporter))
        self._tracer = self._traces.get_tracer(SCOPE)
        readers: list[MetricReader] = [] if metric_reader is None else [metric_reader]
        if settings.metrics and metric_reader is None:
            interval_ms = settings.metrics_interval_s * 1000
            readers.append(
                PeriodicExportingMetricReader(
                    OTLPMetricExporter(endpoint=_endpoint(settings, "metrics")), export_interval_millis=interval_ms
                )
            )
        self._meters = MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
        meter = self._meters.get_meter(SCOPE)
        self._records = DeferredRecords(meter) if readers else None

        def histogram(name: str, description: str) -> Any:
            if self._records is None:  # metrics = false: nothing would read them (the SDK still costs per record)
                return _NOT_READ
            return self._records.histogram(
                meter.create_histogram(
                    name, unit="s", description=description, explicit_bucket_boundaries_advisory=DURATION_BUCKETS
                )
            )

        self._server_duration = histogram(
            "mcp.server.operation.duration",
            "MCP request or notification duration as observed on the receiver from the time it was received "
            "until the result or ack is sent.",
        )
        self._client_duration = histogram(
            "mcp.client.operation.duration",
            "The duration of the MCP request or notification as observed on the sender from the time it was "
            "sent until the response or ack is received.",
        )
        self._session_duration = histogram(
            "mcp.server.session.duration", "The duration of the MCP session as observed on the MCP server."
        )

    def server(
        self, request: Request, *, mcp_version: str | None, session_id: str | None
    ) -> AbstractContextManager[None]:
        arrival = RECEIVED_OVER.get()
        in_meta = carried(request.params)
        over_http = arrival.http_trace if arrival is not None else NO_TRACE
        carrier = in_meta or over_http  # its baggage too: what the CLIENT spans pass on
        parent = _PROPAGATOR.extract(dict(carrier)) if carrier else NO_PARENT  # (what extract makes of nothing)
        dropped = self._dropped(parent)
        if dropped is not None and self._server_duration is _NOT_READ:  # no span, no metric: nothing to name
            return DroppedServer(dropped, _NOT_READ, {}, failed_metric)
        name, named = _target_attributes(request.method, request.params)
        metric: dict[str, str | int] = dict(named)
        if mcp_version is not None:
            metric["mcp.protocol.version"] = mcp_version
        metric.update(_network_attributes(arrival))
        if dropped is not None:
            return DroppedServer(dropped, self._server_duration, metric, failed_metric)
        links = []
        if in_meta and over_http:  # the transport's context, linked (the conventions: MCP's is the parent)
            ambient = trace.get_current_span(_PROPAGATOR.extract(dict(over_http))).get_span_context()
            if ambient.is_valid:
                links.append(Link(ambient))
        attributes: dict[str, str | int] = dict(named)
        attributes["jsonrpc.request.id"] = str(request.id)
        resource = resource_of(request.method, request.params)
        if resource is not None:
            attributes[RESOURCE_URI] = resource
        if mcp_version is not None:
            attributes["mcp.protocol.version"] = mcp_version
        if session_id is not None:
            attributes["mcp.session.id"] = session_label(session_id)
        attributes.update(_arrival_attributes(arrival))
        try:
            span = self._tracer.start_span(name, parent, SpanKind.SERVER, attributes, links)
        finally:
            self._ids.next_trace_id = None
        context = trace.set_span_in_context(span, parent)
        return _Scope(span, context, self._server_duration, metric, client=False, verbatim=self._verbatim)

    def _dropped(self, parent: otel_context.Context) -> Dropped | None:
        """The request's trace when the sampler drops it (decided here, once: ``unsampled.py``), else
        None, the trace id it was asked about then being the one the SDK's span takes."""
        if self._sampler is None:
            return None
        if parent is NO_PARENT and self._without_parent is not None:  # (most requests: nothing came in)
            return self._without_parent.dropped()
        parent_span = trace.get_current_span(parent).get_span_context() if parent is not NO_PARENT else None
        remote = parent_span if parent_span is not None and parent_span.is_valid else None
        trace_id = remote.trace_id if remote is not None else self._ids.generate_trace_id()
        decision = self._sampler.should_sample(parent, trace_id, "", SpanKind.SERVER)
        if decision.decision is not Decision.DROP:
            if remote is None:
                self._ids.next_trace_id = trace_id
            return None
        return Dropped(trace_id, dropped_flags(remote, self._ids), decision.trace_state, parent)

    def client(
        self, method: str, params: dict[str, Any] | None, *, to: Destination, mcp_version: str | None
    ) -> AbstractContextManager[ClientSpan]:
        dropped = DROPPED.get()
        if dropped is not None and self._client_duration is _NOT_READ:  # no span, no metric: nothing to name
            return DroppedClient(dropped, _NOT_READ, {}, ids=self._ids, on_error=failed_metric)
        name, attributes = _target_attributes(method, params)
        metric: dict[str, str | int] = attributes
        metric["network.transport"] = to.transport
        if to.transport == "tcp":
            metric["network.protocol.name"] = "http"
        if to.protocol_version is not None:
            metric["network.protocol.version"] = to.protocol_version
        if to.address is not None:
            metric["server.address"] = to.address
            if to.port is not None:
                metric["server.port"] = to.port
        if mcp_version is not None:
            metric["mcp.protocol.version"] = mcp_version
        if dropped is not None:
            return DroppedClient(dropped, self._client_duration, metric, ids=self._ids, on_error=failed_metric)
        on_span: dict[str, str | int] = {**metric, UPSTREAM_ATTRIBUTE: to.namespace}
        resource = resource_of(method, params)
        if resource is not None:
            on_span[RESOURCE_URI] = resource
        span = self._tracer.start_span(name, None, SpanKind.CLIENT, on_span)
        context = trace.set_span_in_context(span)
        return _Scope(span, context, self._client_duration, metric, client=True, verbatim=self._verbatim)

    def step(self, name: str, **attributes: str | int) -> AbstractContextManager[None]:
        if DROPPED.get() is not None:  # inside a dropped request: dropped with it
            return nullcontext()
        return self._step(name, attributes)

    @contextmanager
    def _step(self, name: str, attributes: dict[str, str | int]) -> Iterator[None]:
        """A step inside an MCP span is its child; one before any (a token check) the HTTP request's."""
        parent = None
        arrival = RECEIVED_OVER.get()
        if not trace.get_current_span().get_span_context().is_valid and arrival is not None and arrival.http_trace:
            parent = _PROPAGATOR.extract(dict(arrival.http_trace))
        with self._tracer.start_as_current_span(
            name,
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield
            except BaseException as exc:
                failed(span, exc, None, verbatim=self._verbatim)
                raise

    def session_ended(self, duration_s: float, *, mcp_version: str | None, arrival: Arrival | None) -> None:
        attributes = _network_attributes(arrival)
        if mcp_version is not None:
            attributes["mcp.protocol.version"] = mcp_version
        self._session_duration.record(duration_s, attributes)

    def force_flush(self) -> None:
        """Export what is buffered now."""
        if self._records is not None:
            self._records.drain()
        self._traces.force_flush()
        self._meters.force_flush()

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Export what is buffered and stop, waiting ``timeout_s`` at most (the gateway's
        ``shutdown_grace_s``). The exporters' own bounds are per attempt (10 s, retried with backoff,
        traces then metrics): a collector that is down or never answers held a stopping gateway 15 to
        25 s, past a service manager's patience. What is not exported in time is dropped; the export
        threads are daemons, ended with the process."""
        if self._records is not None:
            self._records.drain()  # (the meter provider's last collection would too; a reader may make none)
        done = threading.Event()

        def stop() -> None:
            try:
                self._traces.shutdown()
                self._meters.shutdown()
            finally:
                done.set()

        threading.Thread(target=stop, name="telemetry-shutdown", daemon=True).start()
        if not done.wait(timeout_s):
            _log.warning(
                "telemetry_export_abandoned", waited_s=timeout_s, reason="the collector did not take it in time"
            )
            logging.getLogger("opentelemetry").disabled = True  # its threads' retries, as the process ends: noise


class _NotRead:
    """A histogram nobody reads (``[telemetry] metrics = false``)."""

    def record(self, amount: float, attributes: Any = None, context: Any = None) -> None:
        return


_NOT_READ = _NotRead()


class _Scope:
    """A span current for as long as a request takes, its duration recorded at the end. A plain context
    manager: the SDK's ``start_as_current_span`` nests two generator-based ones, which cost a tenth of
    tracing a request."""

    __slots__ = ("_client", "_context", "_histogram", "_metric", "_span", "_started", "_token", "_verbatim")

    def __init__(
        self,
        span: trace.Span,
        context: otel_context.Context,
        histogram: Any,
        metric: dict[str, str | int],
        *,
        client: bool,
        verbatim: bool,
    ) -> None:
        self._span, self._context, self._histogram = span, context, histogram
        self._metric, self._client, self._verbatim = metric, client, verbatim
        self._started = 0.0
        self._token: Any = None

    def __enter__(self) -> Any:
        self._token = otel_context.attach(self._context)
        self._started = time.perf_counter()
        return _SentSpan(self._span) if self._client else None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            if exc is not None:
                failed(self._span, exc, self._metric, client=self._client, verbatim=self._verbatim)
                if not self._client:  # a name a client made up would start a series: kept for what succeeded
                    self._metric.pop("gen_ai.prompt.name", None)
                    self._metric.pop("gen_ai.tool.name", None)
            self._span.end()
            self._histogram.record(time.perf_counter() - self._started, self._metric, self._context)
        finally:
            otel_context.detach(self._token)


def exporting_to(settings: TelemetrySettings) -> dict[str, Any]:
    """What the start-up log says of the export: where to (no credentials: a URL's user part is cut),
    as whom, how much is sampled."""
    endpoint = settings.endpoint or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318"
    parts = urlsplit(endpoint)
    shown = parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]).geturl()
    sampled = settings.sample_ratio if settings.sample_ratio is not None else os.environ.get("OTEL_TRACES_SAMPLER")
    return {
        "endpoint": shown,
        "service_name": str(_resource(settings).attributes.get(SERVICE_NAME)),
        "sampled": sampled if sampled is not None else "parentbased_always_on",
        "metrics": settings.metrics,
    }
