"""W3C trace context in MCP messages: ``traceparent``, ``tracestate`` and ``baggage`` in a request's
``params._meta`` (the OpenTelemetry MCP conventions; the 2026-07-28 revision reserves these keys), and
as HTTP headers of the same names towards an HTTP upstream.

Sans-IO: what is read from a message and what is written into one. Values are taken only when they are
strings of a bounded length without control characters, so a client cannot put a header line break or
a megabyte into an upstream request through them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.protocol.jsonrpc import JSON_OBJECT

TRACE_KEYS = ("traceparent", "tracestate", "baggage")
MAX_VALUE_CHARS = {"traceparent": 55, "tracestate": 512, "baggage": 8192}
"""A ``traceparent`` is 55 characters (version 00); W3C bounds ``tracestate`` at 32 members of 256
characters, most vendors keep it short; ``baggage`` is bounded at 8192 bytes by its specification."""


_BOUNDS = tuple((key, MAX_VALUE_CHARS[key]) for key in TRACE_KEYS)  # (each key's bound, in TRACE_KEYS' order)


def _usable_of(found: Mapping[str, Any]) -> dict[str, str]:
    """The trace keys of ``found`` whose values are usable: strings of a bounded length, printable ASCII.
    One comprehension, no call a key: it runs for every request sent upstream while tracing."""
    return {
        key: value
        for key, bound in _BOUNDS
        if isinstance(value := found.get(key), str)
        and 0 < len(value) <= bound
        and value.isascii()
        and value.isprintable()
    }


def carried(params: Mapping[str, Any] | None) -> dict[str, str]:
    """The trace context a request's ``params._meta`` carries (only usable values): what a SERVER span
    is parented by, and the HTTP headers an outgoing request mirrors it in."""
    meta = params.get("_meta") if isinstance(params, JSON_OBJECT) else None
    if meta is None or not isinstance(meta, JSON_OBJECT) or meta.keys().isdisjoint(TRACE_KEYS):
        return {}  # (most requests carry none: the keys are compared in C, and no ABC check runs for a dict)
    return _usable_of(meta)


def from_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The trace context of an HTTP request's headers (lower-case names, as ASGI gives them)."""
    return _usable_of(headers)


def with_trace(params: dict[str, Any] | None, context: Mapping[str, str]) -> dict[str, Any] | None:
    """``params`` whose ``_meta`` carries ``context`` in place of the trace keys it had (what the
    gateway's own client span propagates replaces what the client sent, which is that span's parent)."""
    if not context:
        return params
    meta = params.get("_meta") if params is not None else None
    if not isinstance(meta, JSON_OBJECT):
        meta = {}
    elif not meta.keys().isdisjoint(TRACE_KEYS):  # (most carry none: then nothing is left out)
        meta = {k: v for k, v in meta.items() if k not in TRACE_KEYS}
    return {**(params or {}), "_meta": {**meta, **context}}
