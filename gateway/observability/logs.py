"""Logging: structlog, key=value events, to stderr (stdout may be the MCP stream), secrets redacted.

JSON lines when stderr is not a terminal (for collectors), readable console output when it is.
"""

from __future__ import annotations

import asyncio
import atexit
import datetime
import json
import logging
import sys
import time
from collections.abc import Mapping, MutableMapping
from contextvars import ContextVar, Token
from typing import Any, BinaryIO

import orjson
import structlog

from gateway.observability.after_answer import later

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
    return _redact(event, frozenset())


def _redact(event: MutableMapping[str, Any], trusted: frozenset[str]) -> MutableMapping[str, Any]:
    """Only what can hold a secret is rebuilt: a key named like one, or an object (its keys may be);
    ``trusted`` keys are skipped (their values are the gateway's own words, such as the audit's)."""
    for key in event.keys() - trusted:
        value = event[key]
        if isinstance(value, dict) or key.lower() in _SECRET_KEYS:
            event[key] = _redact_value(key, value)
    return event


REQUEST_CONTEXT: ContextVar[Mapping[str, Any] | None] = ContextVar("gateway.log.request", default=None)
"""What every line logged while a request is served says of it (its id and method). One context variable
set per request, not structlog's one per key: binding two keys and merging them back by walking every
context variable there is cost more than the audit line's other fields."""


def bind_request(request_id: Any, method: str) -> Token[Mapping[str, Any] | None]:
    return REQUEST_CONTEXT.set({"request_id": request_id, "method": method})


def unbind_request(token: Token[Mapping[str, Any] | None]) -> None:
    REQUEST_CONTEXT.reset(token)


def merge_request_context(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """The processor that adds the request's context to a line (what a field of the line says wins)."""
    _merge(event, REQUEST_CONTEXT.get())
    return event


def _merge(event: MutableMapping[str, Any], request: Mapping[str, Any] | None) -> None:
    """A request's context into a line (what a field of the line says wins)."""
    if request is not None:
        for key, value in request.items():
            event.setdefault(key, value)


_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS


def json_line(event: MutableMapping[str, Any], **_kw: Any) -> bytes:
    """One event as UTF-8 JSON, by orjson: the audit writes one per ``prompts/get``, and ``json.dumps``
    was a tenth of the gateway's CPU on that path. What orjson refuses (an integer past 64 bits, a lone
    surrogate) is written by the standard library instead: a log line never fails."""
    try:
        return orjson.dumps(event, default=str, option=_ORJSON_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(event, default=str).encode()


def json_text(event: MutableMapping[str, Any], **_kw: Any) -> str:
    return json_line(event).decode()


FLUSH_AFTER_S = 0.05
FLUSH_AT_BYTES = 1 << 16


class BatchedLogger:
    """structlog's output for JSON lines: the lines logged within ``FLUSH_AFTER_S`` (or until
    ``FLUSH_AT_BYTES``) are written together, one write and one flush, instead of a system call each (the
    audit logs every ``prompts/get``; a flushed write per line was a tenth of the gateway's CPU under
    load, and one per event-loop tick still 6%). Outside a running loop (start, shutdown, a worker
    thread) a line is written at once, after what is pending; what is pending at exit is written then.
    A process killed outright loses at most the last 50 ms of lines, as a buffered log always could."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._flush_on: asyncio.AbstractEventLoop | None = None  # the loop a flush is scheduled on
        atexit.register(self.flush)

    def msg(self, message: bytes) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._pending.append(message)
            self.flush()
            return
        self._pending.append(message)
        self._pending_bytes += len(message)
        if self._pending_bytes >= FLUSH_AT_BYTES:
            self.flush()
        elif self._flush_on is not loop:  # (a flush scheduled on a loop that has since ended never runs)
            self._flush_on = loop
            loop.call_later(FLUSH_AFTER_S, self.flush)

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg

    def flush(self) -> None:
        self._flush_on = None
        if not self._pending:
            return
        lines, self._pending, self._pending_bytes = self._pending, [], 0
        try:
            self._file.write(b"\n".join(lines) + b"\n")
            self._file.flush()
        except (OSError, ValueError):  # stderr closed or gone: nothing left to tell
            pass


_direct: tuple[list[Any], BatchedLogger, bool] | None = None
"""Set while the log is our JSON lines: the processors configured, their output, whether ``info`` is
logged. :func:`info_after_answer` writes through it."""
_UTC = datetime.UTC
STANDARD_KEYS = frozenset({"event", "level", "timestamp", "request_id", "method"})
"""The keys every line has or the request's context adds: the gateway's own, and never an object."""
_second: tuple[int, str] = (-1, "")  # the last second written, and its text


def iso_utc(time_ns: int) -> str:
    """A time as structlog's ``TimeStamper(fmt="iso", utc=True)`` writes it (``datetime.isoformat``: the
    microseconds only when there are any, then ``Z``), the date and time of day made once a second:
    ``datetime.now`` and ``isoformat`` on every audit line cost more than the rest of the line's fields."""
    global _second
    seconds, micro = divmod(time_ns // 1000, 1_000_000)
    made, prefix = _second
    if seconds != made:
        prefix = datetime.datetime.fromtimestamp(seconds, _UTC).isoformat().removesuffix("+00:00")
        _second = (seconds, prefix)
    return f"{prefix}.{micro:06d}Z" if micro else f"{prefix}Z"


def info_after_answer(event: str, fields: dict[str, Any], trusted: frozenset[str] | None = frozenset()) -> bool:
    """Log one ``info`` event as the processor chain would render it (the same keys in the same order: the
    fields, ``event``, the bound context variables, ``level``, ``timestamp``; secrets redacted), without
    going through structlog's logger and chain, and once the request's answer is out (``after_answer``):
    the audit logs one per ``prompts/get``, and the chain's own work was most of that line's cost. Its
    time and the request's context (``bind_request``) are taken now, so it says what it would have said;
    structlog's own context variables, which the gateway does not use, are left to the chain. False
    (nothing logged) when the log is not our JSON lines (a terminal, a test's capture): the caller logs
    the ordinary way then. ``trusted``: fields whose values the caller made and that hold no secret
    (redaction skips them: the audit's fixed keys, with ``STANDARD_KEYS``); None when every field is.
    The line is made in ``fields`` (the caller gives it up: its keys come first, as in the chain's)."""
    direct = _direct
    if direct is None or structlog.get_config()["processors"] is not direct[0]:
        return False
    if direct[2]:
        later(_write_line, direct[1], event, fields, trusted, REQUEST_CONTEXT.get(), time.time_ns())
    return True


def _write_line(
    output: BatchedLogger,
    event: str,
    fields: dict[str, Any],
    trusted: frozenset[str] | None,
    request: Mapping[str, Any] | None,
    at_ns: int,
) -> None:
    fields["event"] = event
    _merge(fields, request)
    fields["level"] = "info"
    fields["timestamp"] = iso_utc(at_ns)
    output.msg(json_line(fields if trusted is None else _redact(fields, trusted)))


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    global _direct
    if json is None:
        json = not sys.stderr.isatty()
    renderer: Any = structlog.dev.ConsoleRenderer()
    factory: Any = structlog.WriteLoggerFactory(file=sys.stderr)
    output: BatchedLogger | None = None
    if json:
        binary = getattr(sys.stderr, "buffer", None)  # absent where stderr was replaced by a text-only stream
        renderer = structlog.processors.JSONRenderer(json_line if binary else json_text)
        if binary:
            output = BatchedLogger(binary)
            factory = lambda *_args: output  # noqa: E731 - one output shared by every logger

    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        merge_request_context,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_secrets,
        structlog.processors.format_exc_info,
        renderer,
    ]
    threshold = logging.getLevelNamesMapping()[level.upper()]
    _direct = (processors, output, threshold <= logging.INFO) if output is not None else None
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    _libraries_log_as_we_do(json, level)


LIBRARY_LOGGERS = ("opentelemetry", "uvicorn", "asyncio")
"""Libraries that log through the standard library's logging (the OpenTelemetry SDK's exporter on its
threads, when the collector is down; uvicorn's errors, such as a connection its client stopped reading;
asyncio's): their records become our kind of line, JSON among JSON, a traceback in its ``exception``."""


def _logger_of_record(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    record = event.get("_record")
    if isinstance(record, logging.LogRecord):
        event["logger"] = record.name
    return event


def _libraries_log_as_we_do(json: bool, level: str) -> None:
    renderer: Any = structlog.processors.JSONRenderer(json_text) if json else structlog.dev.ConsoleRenderer()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processor=renderer,
            foreign_pre_chain=[
                _logger_of_record,
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                *([structlog.processors.format_exc_info] if json else []),  # (one line: the traceback as text)
            ],
        )
    )
    for name in LIBRARY_LOGGERS:
        library = logging.getLogger(name)
        library.handlers = [handler]
        library.propagate = False
        library.setLevel(max(logging.WARNING, logging.getLevelNamesMapping()[level.upper()]))
