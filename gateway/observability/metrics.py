"""Prometheus metrics, health and readiness for the HTTP front end.

Counters and histograms are updated where things happen (requests, list_changed fan-outs); upstream
states, restarts and session counts are read from the gateway when scraped, so they cannot drift.
Each gateway has its own registry: two gateways in one process (tests) never mix their numbers.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import accumulate
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from gateway.observability.after_answer import later

if TYPE_CHECKING:
    from starlette.requests import Request as HttpRequest
    from starlette.responses import Response
    from starlette.routing import Route

STATES = ("starting", "ready", "backing-off", "failed", "stopped")


class UpstreamView(Protocol):
    @property
    def namespace(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def restarts(self) -> int: ...

    @property
    def ready(self) -> bool: ...


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._requests = _RequestCounts(LATENCY_BUCKETS)
        self.registry.register(self._requests)
        self.limited = Counter(
            "prompt_gateway_rate_limited_total",
            "Client requests refused for a [limits] rate, by the limit",
            ["limit"],
            registry=self.registry,
        )
        self.list_changed = Counter(
            "prompt_gateway_list_changed_sent_total",
            "list_changed notifications fanned out to client sessions",
            registry=self.registry,
        )

    def rate_limited(self, limit: str) -> None:
        self.limited.labels(limit).inc()

    def observe(self, method: str) -> _Observed:
        """Count and time one request; the outcome is ``ok`` or the JSON-RPC error code."""
        return _Observed(self, method)

    def _observed(self, method: str, outcome: str, seconds: float) -> None:
        self._requests.observe(method, outcome, seconds)

    def watch(self, upstreams: Callable[[], Sequence[UpstreamView]], sessions: Callable[[], int]) -> None:
        self.registry.register(_GatewayCollector(upstreams, sessions))

    def routes(
        self,
        upstreams: Callable[[], Sequence[UpstreamView]],
        cluster: Callable[[], dict[str, Any] | None] = lambda: None,
        replacements: Callable[[], Mapping[str, UpstreamView]] = dict,
    ) -> list[Route]:
        from starlette.responses import JSONResponse, Response  # where HTTP is served only (serving.py)
        from starlette.routing import Route

        async def healthz(request: HttpRequest) -> Response:
            return JSONResponse({"status": "ok"})

        async def readyz(request: HttpRequest) -> Response:
            """Ready while some upstream is; what the replicas share (Redis) is reported, not required:
            a replica without it still serves."""
            states = {u.namespace: u.state for u in upstreams()}
            ready = any(u.ready for u in upstreams())
            body: dict[str, Any] = {"ready": ready, "upstreams": states}
            if replacing := {namespace: u.state for namespace, u in replacements().items()}:
                body["replacing"] = replacing  # a reload's successors, until each takes over
            shared = cluster()
            if shared is not None:
                body["cluster"] = shared
            return JSONResponse(body, status_code=200 if ready else 503)

        async def metrics(request: HttpRequest) -> Response:
            return Response(generate_latest(self.registry), media_type="text/plain; version=0.0.4; charset=utf-8")

        return [Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics)]


LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)


class _RequestCounts(Collector):
    """``prompt_gateway_requests_total`` (by method and outcome) and ``prompt_gateway_request_seconds``
    (by method), counted on the request's path in plain numbers and turned into Prometheus families when
    scraped, as prometheus-client's own Counter and Histogram would write them. Their per-call path
    (a lock per counter, a Python loop over the buckets) cost more than the rest of the metrics' work
    on every request; everything here runs on the event loop, scrapes included, so nothing needs a lock."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self._bounds = buckets
        bounds: list[str] = [floatToGoString(bound) for bound in buckets]  # type: ignore[no-untyped-call]
        self._le = [*bounds, "+Inf"]  # as prometheus-client writes them: "1.0", "2.5"
        self._counts: dict[tuple[str, str], int] = {}
        self._latency: dict[str, list[int]] = {}  # per method: the count in each bucket, the last +Inf
        self._sums: dict[str, float] = {}
        self._created: dict[object, float] = {}  # when each series was first counted (its ``_created``)

    def observe(self, method: str, outcome: str, seconds: float) -> None:
        key = (method, outcome)
        count = self._counts.get(key)
        if count is None:
            self._created[key] = time.time()
        self._counts[key] = (count or 0) + 1
        buckets = self._latency.get(method)
        if buckets is None:
            buckets = self._latency[method] = [0] * (len(self._bounds) + 1)
            self._sums[method] = 0.0
            self._created[method] = time.time()
        buckets[bisect_left(self._bounds, seconds)] += 1  # the first bound at or above: ``le`` includes it
        self._sums[method] += seconds

    def collect(self) -> Iterator[Any]:
        requests = CounterMetricFamily(
            "prompt_gateway_requests", "Client requests by method and outcome", labels=["method", "outcome"]
        )
        for key, count in self._counts.items():
            requests.add_metric(list(key), float(count), created=self._created[key])
        yield requests
        latency = HistogramMetricFamily(
            "prompt_gateway_request_seconds", "Client request latency by method", labels=["method"]
        )
        created = GaugeMetricFamily(
            "prompt_gateway_request_seconds_created", "Client request latency by method", labels=["method"]
        )
        for method, buckets in self._latency.items():
            cumulative = list(accumulate(buckets))
            latency.add_metric([method], list(zip(self._le, map(float, cumulative), strict=True)), self._sums[method])
            created.add_metric([method], self._created[method])
        yield latency
        yield created


class _Observed:
    """Around one request (a plain context manager: ``contextlib``'s generator-based one costs several
    times more, on every request)."""

    __slots__ = ("_method", "_metrics", "_started")

    def __init__(self, metrics: Metrics, method: str) -> None:
        self._metrics, self._method = metrics, method
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        outcome = "ok" if exc is None or not isinstance(exc, Exception) else outcome_of(getattr(exc, "code", -32603))
        later(self._metrics._observed, self._method, outcome, time.perf_counter() - self._started)


def outcome_of(code: object) -> str:
    """The ``outcome`` label of a failed request: its JSON-RPC error code when it is one the JSON-RPC and MCP
    specs reserve (-32768 to -32000: a bounded set), else ``other``. An upstream's own codes pass through
    to the client, but as a label each would start a series (a tester's random codes made one a request)."""
    if isinstance(code, int) and not isinstance(code, bool) and -32768 <= code <= -32000:
        return str(code)
    return "other"


class _GatewayCollector(Collector):
    def __init__(self, upstreams: Callable[[], Sequence[UpstreamView]], sessions: Callable[[], int]) -> None:
        self._upstreams = upstreams
        self._sessions = sessions

    def collect(self) -> Iterator[Any]:
        up = GaugeMetricFamily("prompt_gateway_upstream_up", "1 when the upstream is ready", labels=["upstream"])
        state = GaugeMetricFamily(
            "prompt_gateway_upstream_state",
            "The upstream's state (1 for the current one)",
            labels=["upstream", "state"],
        )
        restarts = CounterMetricFamily("prompt_gateway_upstream_restarts", "Upstream reconnects", labels=["upstream"])
        for upstream in self._upstreams():
            up.add_metric([upstream.namespace], 1.0 if upstream.ready else 0.0)
            for name in STATES:
                state.add_metric([upstream.namespace, name], 1.0 if upstream.state == name else 0.0)
            restarts.add_metric([upstream.namespace], float(upstream.restarts))
        yield from (up, state, restarts)
        yield GaugeMetricFamily(
            "prompt_gateway_sessions",
            "Connected client sessions and open subscriptions/listen streams",
            value=float(self._sessions()),
        )
