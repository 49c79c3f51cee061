"""What a failed request's span and duration metric say of how it ended: the JSON-RPC code of the error
answer, a time-out, a cancel, or the error's class; and a status description in the gateway's own words.
"""

from __future__ import annotations

from typing import Any

import anyio
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from gateway.protocol.errors import (
    SAID_BY_THE_GATEWAY,
    DigestMismatch,
    UpstreamError,
    UpstreamRejected,
    UpstreamTimeout,
)


def error_type_of(exc: BaseException, *, answered_by_peer: bool, verbatim: bool) -> tuple[str, str | None, str]:
    """(error.type, rpc.response.status_code, status description) of what a request ended with: the
    JSON-RPC code of the error answer where there was one (the gateway's to its client; an upstream's
    own, for a CLIENT span), else ``timeout``, ``cancelled`` or the error's class name."""
    code = getattr(exc, "code", None)
    if answered_by_peer:
        code = code if isinstance(exc, UpstreamRejected) else None
    if answered_by_peer and isinstance(exc, DigestMismatch):  # answered, but with bytes not its manifest's
        error_type: str = DigestMismatch.error_type
    elif isinstance(code, int):
        error_type = str(code)
    elif isinstance(exc, (TimeoutError, UpstreamTimeout)):
        error_type = "timeout"
    elif isinstance(exc, anyio.get_cancelled_exc_class()):
        error_type = "cancelled"
    else:
        error_type = type(exc).__qualname__
    status_code = error_type if isinstance(code, int) else None
    return error_type, status_code, _description(exc, error_type, verbatim=verbatim)


def _description(exc: BaseException, error_type: str, *, verbatim: bool) -> str:
    """A failed span's status description, in the gateway's own words as the audit's ``reason`` is: an
    upstream's message (or an exception's, which may hold anything) may quote an argument's value, and
    the docs promise values are never recorded. ``[telemetry] upstream_error_messages`` opts in to it."""
    if verbatim or isinstance(exc, SAID_BY_THE_GATEWAY):
        return str(getattr(exc, "message", None) or exc or type(exc).__name__)[:512]
    if isinstance(exc, UpstreamRejected):
        return f"Upstream '{exc.upstream}' answered with error {exc.code}"
    if isinstance(exc, DigestMismatch):
        return exc.reason
    if isinstance(exc, UpstreamError):
        return f"Upstream '{exc.upstream}' failed ({type(exc).__name__})"
    return error_type


def failed(
    span: trace.Span, exc: BaseException, metric: dict[str, Any] | None, *, client: bool = False, verbatim: bool
) -> None:
    error_type, status_code, message = error_type_of(exc, answered_by_peer=client, verbatim=verbatim)
    span.set_attribute("error.type", error_type)
    if status_code is not None:
        span.set_attribute("rpc.response.status_code", status_code)
    span.set_status(Status(StatusCode.ERROR, message))
    if metric is not None:
        _metric_failed(metric, error_type, status_code)


def _metric_failed(metric: dict[str, Any], error_type: str, status_code: str | None) -> None:
    metric["error.type"] = error_type
    if status_code is not None:
        metric["rpc.response.status_code"] = status_code


def failed_metric(exc: BaseException, metric: dict[str, Any], *, client: bool) -> None:
    """What a failure adds to a dropped request's duration metric: what ``failed`` adds to a span's."""
    error_type, status_code, _ = error_type_of(exc, answered_by_peer=client, verbatim=False)
    _metric_failed(metric, error_type, status_code)
