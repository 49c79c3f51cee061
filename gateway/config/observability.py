"""``[telemetry]``: traces and metrics over OTLP (docs/observability.md)."""

from __future__ import annotations

from pydantic import Field

from gateway.config.sections import _Section


class TelemetrySettings(_Section):
    """Off by default; when off, nothing of the OpenTelemetry SDK is imported. What is not set here is
    read from the standard ``OTEL_*`` environment variables (endpoint, headers, sampler, resource)."""

    enabled: bool = False
    endpoint: str | None = Field(None, pattern=r"^https?://", max_length=2048)
    """The OTLP/HTTP collector's base URL (``/v1/traces`` and ``/v1/metrics`` are added), as
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is; that variable (default http://localhost:4318) when unset."""
    service_name: str | None = Field(None, min_length=1, max_length=256)
    sample_ratio: float | None = Field(None, ge=0, le=1)
    """The share of traces started here that are sampled (a client's sampled flag is followed); the
    ``OTEL_TRACES_SAMPLER`` variable when unset (default: every trace)."""
    metrics: bool = True
    """Export the MCP duration histograms too."""
    metrics_interval_s: float = Field(60.0, gt=0, le=3600)
    upstream_error_messages: bool = False
    """Put an upstream's own error message in a failed span's status description. Off: the gateway's own
    words (``Upstream 'x' answered with error -32602``), since an upstream's message may quote an
    argument's value, and traces are read by more people than the audit."""
