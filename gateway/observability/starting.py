"""Whether and how the gateway's OpenTelemetry tracing starts: ``[telemetry]`` and the environment decide,
and the SDK is imported only when it is wanted (the gateway runs without it installed)."""

from __future__ import annotations

import importlib.util
import os

import structlog

from gateway.config import TelemetrySettings
from gateway.observability import tracing
from gateway.protocol.errors import ConfigError

log = structlog.get_logger("gateway.app")


def telemetry_wanted(settings: TelemetrySettings) -> bool:
    """``[telemetry] enabled``, unless ``OTEL_SDK_DISABLED`` (the standard switch) says otherwise; and
    the SDK importable then (a ConfigError saying how to install it, before anything starts)."""
    if not settings.enabled:
        return False
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        log.info("telemetry_disabled", reason="OTEL_SDK_DISABLED=true in the environment")
        return False
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        raise ConfigError(
            "[telemetry] is enabled but the OpenTelemetry SDK is not installed: install the gateway with its "
            "telemetry extra (pip install '.[telemetry]', pipx install '.[telemetry]')"
        )
    return True


def start_telemetry(settings: TelemetrySettings) -> tracing.Tracing | None:
    """The SDK's tracing installed, where ``[telemetry]`` wants it; the SDK is imported only then."""
    if not telemetry_wanted(settings):
        return None
    from gateway.observability.otel import OpenTelemetryTracing, exporting_to

    implementation = OpenTelemetryTracing(settings)
    tracing.install(implementation)
    log.info("telemetry_started", **exporting_to(settings))
    return implementation
