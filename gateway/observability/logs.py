"""Logging: structlog, key=value events, to stderr (stdout may be the MCP stream), secrets redacted.

JSON lines when stderr is not a terminal (for collectors), readable console output when it is.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

REDACTED = "[redacted]"
_SECRET_KEYS = frozenset({
    "token", "tokens", "authorization", "cursor_secret", "cursor_secrets", "secret", "secrets", "password",
    "headers", "env", "api_key",
})  # fmt: skip


def _redact_value(key: str, value: Any) -> Any:
    if key.lower() in _SECRET_KEYS:
        if isinstance(value, dict):
            return dict.fromkeys(value, REDACTED)
        return REDACTED
    if isinstance(value, dict):
        return {k: _redact_value(str(k), v) for k, v in value.items()}
    return value


def redact_secrets(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        event[key] = _redact_value(key, event[key])
    return event


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    if json is None:
        json = not sys.stderr.isatty()
    renderer: Any = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_secrets,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
