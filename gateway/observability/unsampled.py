"""A request the sampler drops, decided once at the edge: no span objects at all on its path.

The SDK decides sampling inside ``start_span``, after the gateway has built the span's name and
attributes, and even a dropped span costs its ids, its non-recording span, its context attached and
detached, and the same again for every CLIENT span under it (a quarter of the gateway's CPU per
request at ``sample_ratio = 0.1``, where nine requests in ten are dropped). Here the provider's own
sampler is asked first, with the trace id the SDK would use; a request it drops keeps only what leaves
the process: the duration histograms, and the trace context its upstream requests carry, made as the
SDK makes a dropped span's (same trace id, a fresh span id, the trace flags and ``tracestate`` it
would set), so an upstream sees exactly what it saw before. A request the sampler keeps goes through
the SDK as ever, with that same trace id (``EdgeIds``), so the sampler's answer is the same there.
"""

from __future__ import annotations

import time
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, StaticSampler, TraceIdRatioBased
from opentelemetry.trace import SpanContext, TraceFlags, TraceState

from gateway.protocol.jsonrpc import RequestId
from gateway.protocol.trace_context import with_trace


class EdgeIds(IdGenerator):
    """The SDK's random ids, but a trace id the edge drew for a request it then samples is the one the
    SDK's ``start_span`` takes next (set and taken with no await between: one event loop)."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()
        self.next_trace_id: int | None = None

    def generate_span_id(self) -> int:
        return self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        drawn, self.next_trace_id = self.next_trace_id, None
        return drawn if drawn is not None else self._random.generate_trace_id()

    def is_trace_id_random(self) -> bool:
        return self._random.is_trace_id_random()


def decided_at_the_edge(sampler: Sampler) -> bool:
    """Whether the edge may decide for the whole request: the SDK's own samplers (what ``sample_ratio``
    and ``OTEL_TRACES_SAMPLER`` make) read neither a span's name nor its attributes, and drop every
    span under a dropped one (its trace id, or its parent's flag, decides). Any other sampler sees
    every span, as before."""
    return isinstance(sampler, (ParentBased, TraceIdRatioBased, StaticSampler))


class Dropped:
    """A dropped request's trace, as the SDK's non-recording span would carry it on: its trace id, its
    trace flags (not sampled; random-trace-id as the SDK sets it), ``tracestate``, and what came in (the
    baggage passed on)."""

    __slots__ = ("flags", "parent", "trace_id", "trace_state")

    def __init__(self, trace_id: int, flags: int, trace_state: TraceState | None, parent: otel_context.Context) -> None:
        self.trace_id, self.flags, self.trace_state, self.parent = trace_id, flags, trace_state, parent


DROPPED: ContextVar[Dropped | None] = ContextVar("dropped_trace", default=None)
NO_PARENT = otel_context.Context()
"""What the propagators extract from a request that carries no trace context (an empty context: no
parent span, no baggage; immutable, so one serves every such request). A dropped request's histograms
are recorded with it too; the SDK takes an empty context for none given and reads the current one,
which in a dropped request holds no sampled span either: no exemplar, the trace-based filter's answer."""


def dropped_flags(parent: SpanContext | None, ids: IdGenerator) -> int:
    """The trace flags ``Tracer.start_span`` gives a span it drops: not sampled, and random-trace-id
    where the trace id is the generator's random one or the parent's says so."""
    random_trace_id = ids.is_trace_id_random() if parent is None else parent.trace_flags.random_trace_id
    return TraceFlags.DEFAULT | (TraceFlags.RANDOM_TRACE_ID if random_trace_id else 0)


class RootDecision:
    """The sampler's answer for a request that carries no trace context, where the gateway made the
    sampler itself (``sample_ratio``: ``ParentBased(TraceIdRatioBased(ratio))``): with no parent,
    ``ParentBased`` asks its root, which keeps a trace id whose low 64 bits are under its bound and
    passes on no ``tracestate`` (there is none); the SDK's calls for that answer (two samplers, a
    sampling result, the parent looked up in an empty context) were a quarter of what a dropped
    request's tracing cost. A test holds the two answers equal for every trace id it draws."""

    __slots__ = ("_bound", "_flags", "_ids")

    def __init__(self, root: TraceIdRatioBased, ids: EdgeIds) -> None:
        self._bound, self._ids = root.bound, ids
        self._flags = dropped_flags(None, ids)

    def dropped(self) -> Dropped | None:
        """The request's trace when dropped; else None, its trace id left for the SDK's span."""
        trace_id = self._ids.generate_trace_id()
        if trace_id & TraceIdRatioBased.TRACE_ID_LIMIT < self._bound:
            self._ids.next_trace_id = trace_id
            return None
        return Dropped(trace_id, self._flags, None, NO_PARENT)


class DroppedServer:
    """Around a dropped request: no span, its duration recorded, its trace current for its upstream
    requests (``DROPPED``)."""

    __slots__ = ("_dropped", "_histogram", "_metric", "_on_error", "_started", "_token")

    def __init__(self, dropped: Dropped, histogram: Any, metric: dict[str, str | int], on_error: Any) -> None:
        self._dropped, self._histogram, self._metric, self._on_error = dropped, histogram, metric, on_error
        self._started = 0.0
        self._token: Token[Dropped | None] | None = None

    def __enter__(self) -> None:
        self._token = DROPPED.set(self._dropped)
        self._started = time.perf_counter()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            if exc is not None:
                self._on_error(exc, self._metric, client=False)
                self._metric.pop("gen_ai.prompt.name", None)  # as for a recorded span: a made-up name makes
                self._metric.pop("gen_ai.tool.name", None)  # no series
            self._histogram.record(time.perf_counter() - self._started, self._metric, context=NO_PARENT)
        finally:
            if self._token is not None:
                DROPPED.reset(self._token)


_BAGGAGE = W3CBaggagePropagator()


class DroppedClient:
    """A CLIENT request under a dropped one: no span; its context goes upstream as the SDK's would."""

    __slots__ = ("_dropped", "_histogram", "_ids", "_metric", "_on_error", "_started")

    def __init__(
        self,
        dropped: Dropped,
        histogram: Any,
        metric: dict[str, str | int],
        *,
        ids: IdGenerator,
        on_error: Any,
    ) -> None:
        self._dropped, self._histogram, self._metric = dropped, histogram, metric
        self._ids, self._on_error = ids, on_error
        self._started = 0.0

    def __enter__(self) -> DroppedClient:
        self._started = time.perf_counter()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if exc is not None:
            self._on_error(exc, self._metric, client=True)
        self._histogram.record(time.perf_counter() - self._started, self._metric, context=NO_PARENT)

    def inject(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """What ``TraceContextTextMapPropagator`` and ``W3CBaggagePropagator`` write for the span the SDK
        would have made here: the request's trace, a span id of its own, the dropped span's flags."""
        dropped = self._dropped
        span_id = self._ids.generate_span_id()
        carrier = {"traceparent": f"00-{dropped.trace_id:032x}-{span_id:016x}-{dropped.flags:02x}"}
        if dropped.trace_state:
            carrier["tracestate"] = dropped.trace_state.to_header()
        if dropped.parent is not NO_PARENT:  # (nothing came in: no baggage to pass on)
            _BAGGAGE.inject(carrier, dropped.parent)
        return with_trace(params, carrier)

    def sent(self, request_id: RequestId) -> None:
        return
