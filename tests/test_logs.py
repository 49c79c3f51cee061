"""The JSON log output: lines batched into one write, never lost at exit, never failing to render."""

from __future__ import annotations

import asyncio
import io
import json

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from gateway.observability.logs import BatchedLogger, json_line


class CountingFile(io.BytesIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.flushed = asyncio.Event()

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.writes += 1
        return super().write(data)

    def flush(self) -> None:
        super().flush()
        self.flushed.set()


def test_lines_logged_together_are_written_in_one_write() -> None:
    async def logging_under_load() -> CountingFile:
        file = CountingFile()
        output = BatchedLogger(file)
        for n in range(5):
            output.msg(json_line({"event": "audit", "n": n}))
        assert file.writes == 0  # not yet: they wait for the flush
        await asyncio.wait_for(file.flushed.wait(), 5)
        return file

    file = asyncio.run(logging_under_load())
    assert file.writes == 1
    assert [json.loads(line)["n"] for line in file.getvalue().splitlines()] == [0, 1, 2, 3, 4]


def test_outside_an_event_loop_a_line_is_written_at_once_after_what_was_pending() -> None:
    file = CountingFile()
    output = BatchedLogger(file)

    async def log_one() -> None:
        output.msg(b'{"n":1}')

    asyncio.run(log_one())  # the loop ends before its flush was due
    output.msg(b'{"n":2}')
    assert file.getvalue() == b'{"n":1}\n{"n":2}\n'


def test_what_is_pending_is_written_when_asked_at_exit() -> None:
    file = CountingFile()
    output = BatchedLogger(file)

    async def log_and_stop() -> None:
        output.msg(b'{"n":1}')

    asyncio.run(log_and_stop())
    output.flush()  # what atexit calls
    assert file.getvalue() == b'{"n":1}\n'


def test_a_value_orjson_refuses_is_still_a_json_line() -> None:
    line = json_line({"event": "x", "big": 2**70, "odd": "\ud800", 3: "non-string key"})
    decoded = json.loads(line)
    assert decoded["big"] == 2**70
    assert decoded["odd"] == "\ud800"


def test_what_the_telemetry_sdk_logs_is_a_json_line_too(capsys: object) -> None:
    """The exporter logs through the standard library (on its own thread) when the collector is down:
    those records must not break the one-JSON-object-a-line stream of the gateway's log."""
    import logging
    import sys

    import pytest
    import structlog

    from gateway.observability.logs import configure_logging

    capture = capsys
    assert isinstance(capture, pytest.CaptureFixture)
    configure_logging("info", json=True)
    try:
        logging.getLogger("opentelemetry.exporter.otlp.proto.http").warning("Transient error %s", "refused")
        sys.stderr.flush()
        line = capture.readouterr().err.strip().splitlines()[-1]
    finally:  # the logging of this worker's other tests is not this test's captured stderr
        structlog.reset_defaults()
        library = logging.getLogger("opentelemetry")
        library.handlers, library.propagate = [], True
    record = json.loads(line)
    assert record["event"] == "Transient error refused"
    assert record["level"] == "warning"
    assert record["logger"] == "opentelemetry.exporter.otlp.proto.http"


@pytest.mark.parametrize("values", [True, False])
def test_the_audit_line_written_directly_is_the_line_the_chain_would_write(monkeypatch: object, values: bool) -> None:
    """The audit's own keys skip the redaction, the rest does not: an argument value kept by
    ``argument_values`` under a secret's name is redacted, as the processor chain redacts it; keys, order
    and the request's context (its id; the line's own method wins) are the chain's."""
    import sys

    import pytest

    from gateway.config import AuditSettings
    from gateway.identity.audit import AuditTrail
    from gateway.identity.principal import Identity
    from gateway.observability.logs import bind_request, configure_logging, unbind_request

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    params = {"name": "team__deploy", "arguments": {"password": "hunter2", "env": "prod", "target": "eu"}}

    def audit_line(direct: bool) -> dict[str, object]:
        written = io.BytesIO()
        monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(written, write_through=True))
        configure_logging("info", json=True)
        if not direct:  # the chain's path: what info_after_answer answers for when the config is ours
            monkeypatch.setattr("gateway.observability.logs._direct", None)
            # a fresh logger: the module's caches the output it first wrote to (an earlier case's)
            monkeypatch.setattr("gateway.identity.audit.log", structlog.get_logger("gateway.audit"))
        trail = AuditTrail(AuditSettings(argument_values=values))
        bound = bind_request(7, "prompts/get")
        try:
            with trail.request(Identity.token("ci"), "prompts/get", params, "team"):
                pass
        finally:
            unbind_request(bound)
        sys.stderr.flush()
        line: dict[str, object] = json.loads(written.getvalue().splitlines()[-1])
        return line

    direct, chain = audit_line(direct=True), audit_line(direct=False)
    for line in (direct, chain):
        line.pop("timestamp")
        line["duration_ms"] = 0
    assert list(direct) == list(chain)
    assert direct == chain
    if values:
        assert direct["argument_values"] == {"password": "[redacted]", "env": "[redacted]", "target": "eu"}
    else:
        assert "argument_values" not in direct
        assert direct["arguments"] == ["env", "password", "target"]
    assert direct["request_id"] == 7
    assert direct["who"] == {"kind": "token", "name": "ci"}


@given(st.integers(min_value=0, max_value=4_102_444_800 * 10**9))  # to 2100
def test_the_audit_lines_timestamp_is_structlogs_iso_timestamp(time_ns: int) -> None:
    """What ``TimeStamper(fmt="iso", utc=True)`` writes for the same instant (datetime floors to the
    microsecond, and leaves out a fraction of zero)."""
    import datetime

    from gateway.observability.logs import iso_utc

    seconds, micro = divmod(time_ns // 1000, 1_000_000)
    instant = datetime.datetime.fromtimestamp(seconds, datetime.UTC).replace(microsecond=micro)
    assert iso_utc(time_ns) == instant.isoformat().replace("+00:00", "Z")
    assert iso_utc(time_ns) == iso_utc(time_ns)  # the second's text, made or kept, is the same
