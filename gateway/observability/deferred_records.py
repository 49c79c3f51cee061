"""Duration histograms recorded in batches, off the request's path, by the SDK itself.

One ``Histogram.record`` of opentelemetry-sdk 1.45 with the conventions' attributes runs ~100,000
instructions (it cleans, sorts and hashes the attribute set and builds a ``Measurement``). Run among a
request's work, with the gateway's code and data around it, they take three times longer than the same
instructions run one after another in a loop (docs/performance.md, rounds 5 and 6): two records a
request cost more than everything else at ``sample_ratio = 0.1``. So a record is kept as its arguments
(value, attributes, the context whose span an exemplar would name) and handed to the SDK with others:
when 64 wait, a second after the first of them, and before every collection (an observable instrument's
callback, which the SDK runs first in each collection, on whichever thread collects: a reader reads
everything recorded before it). The SDK aggregates exactly as before (temporality, buckets, the
cardinality limit and its overflow series, exemplars from sampled spans); what moves is when, by a
second at most, and so which export interval a record near an interval's end falls in.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import CallbackOptions, Meter, Observation

BATCH = 64
"""Records handed to the SDK together: a few hundred microseconds of the loop's time at once."""
MAX_WAIT_S = 1.0
"""How long a record waits at most for others (a quiet gateway's are handed on alone)."""
NO_SPAN = trace.set_span_in_context(trace.INVALID_SPAN)
"""A context that holds no span, and is not empty: what a record made with none is handed on with."""


class DeferredRecords:
    """The records of every histogram of one meter, waiting to be handed to the SDK in order.

    The queue is a ``deque`` because the event loop appends while a reader's thread may be emptying it:
    both ends are atomic there, so no record is lost or handed on twice."""

    def __init__(self, meter: Meter) -> None:
        self._pending: deque[tuple[Any, float, Mapping[str, Any] | None, otel_context.Context]] = deque()
        self._soon: asyncio.Handle | None = None
        self._later: asyncio.TimerHandle | None = None
        self._later_on: asyncio.AbstractEventLoop | None = None
        meter.create_observable_gauge("gateway.telemetry.deferred", callbacks=[self._before_collection])

    @property
    def waiting(self) -> int:
        """Records not yet handed to the SDK."""
        return len(self._pending)

    @property
    def scheduled(self) -> bool:
        """Whether a hand-on is scheduled on the event loop."""
        return self._soon is not None or self._later is not None

    def histogram(self, histogram: Any) -> DeferredHistogram:
        return DeferredHistogram(histogram, self)

    def add(self, histogram: Any, amount: float, attributes: Mapping[str, Any] | None, context: Any) -> None:
        """Keep a record with the context it was made in. A context holding no span is kept as one that
        says so: the SDK reads an empty context as "none given" and takes whatever is current when the
        record is handed on (a timer's, copied from another request, perhaps a sampled one)."""
        if context is None:
            context = otel_context.get_current()
        pending = self._pending
        pending.append((histogram, amount, attributes, context or NO_SPAN))
        if len(pending) == 1:
            self._hand_on_later()
        elif len(pending) >= BATCH and self._soon is None:
            self._hand_on_soon()

    def _hand_on_later(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # recorded outside the event loop (a stopping gateway): handed on at once
            self.drain()
            return
        if self._later is None or self._later_on is not loop:  # (none yet, or one of a loop that is gone)
            self._later, self._later_on = loop.call_later(MAX_WAIT_S, self._flush), loop

    def _hand_on_soon(self) -> None:
        try:
            self._soon = asyncio.get_running_loop().call_soon(self._flush)
        except RuntimeError:
            self.drain()

    def _flush(self) -> None:
        """The scheduled hand-on, on the event loop's thread: the other one scheduled is not needed."""
        for handle in (self._soon, self._later):
            if handle is not None:
                handle.cancel()
        self._soon = self._later = None
        self.drain()

    def drain(self) -> None:
        """Hand every waiting record to the SDK now, oldest first, on any thread (the loop's scheduled
        hand-ons are left alone: they will find nothing)."""
        pending = self._pending
        while True:
            try:
                histogram, amount, attributes, context = pending.popleft()
            except IndexError:
                return
            histogram.record(amount, attributes, context)

    def _before_collection(self, options: CallbackOptions) -> Iterable[Observation]:
        """Run by the SDK at the start of each collection, on the collecting thread: what was recorded
        before it is in it. The instrument observes nothing, so no metric of that name is exported."""
        self.drain()
        return ()


class DeferredHistogram:
    """A histogram's ``record``, kept for the SDK to take with the others (``DeferredRecords``)."""

    __slots__ = ("_histogram", "_records")

    def __init__(self, histogram: Any, records: DeferredRecords) -> None:
        self._histogram, self._records = histogram, records

    def record(self, amount: float, attributes: Mapping[str, Any] | None = None, context: Any = None) -> None:
        self._records.add(self._histogram, amount, attributes, context)
