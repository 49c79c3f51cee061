"""Bookkeeping moved behind a request's answer (``gateway/observability/after_answer.py``): it runs once the
step that answered is over, before the loop reads anything more, in order, and a failure stops nothing."""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import sys
import threading
import time

import pytest
import structlog

from gateway.config import AuditSettings
from gateway.identity.audit import AuditTrail
from gateway.identity.principal import Identity
from gateway.observability import after_answer
from gateway.observability.after_answer import later
from gateway.observability.logs import bind_request, configure_logging, unbind_request


def test_outside_a_running_loop_the_work_is_done_at_once() -> None:
    done: list[str] = []
    later(done.append, "now")
    assert done == ["now"]


@pytest.mark.anyio
async def test_the_work_runs_after_the_step_that_handed_it_over_and_before_the_next_read() -> None:
    """What the next request (a scrape of /metrics, say) reads, the work has done: the peer that got the
    answer and sends again is read only after it."""
    done: list[str] = []
    seen_by_reader: list[list[str]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(1)
        later(done.append, "counted")
        writer.write(b"answer")  # the answer goes out in the same step
        assert done == []  # not yet: the step is not over
        await reader.readexactly(1)  # the client's next request
        seen_by_reader.append(list(done))
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"?")
        await reader.readexactly(6)
        writer.write(b"?")
        await reader.read()
        writer.close()
    assert seen_by_reader == [["counted"]]


@pytest.mark.anyio
async def test_work_runs_in_order_and_one_failing_stops_none_of_the_rest() -> None:
    done = asyncio.Event()
    order: list[int] = []

    def fails() -> None:
        raise RuntimeError("broken bookkeeping")

    later(order.append, 1)
    later(fails)
    later(order.append, 2)
    later(done.set)
    await asyncio.wait_for(done.wait(), 10)
    assert order == [1, 2]
    assert asyncio.get_running_loop() not in after_answer._pending


@pytest.mark.anyio
async def test_the_audit_line_made_after_the_answer_says_what_it_would_have_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The line is not made in the request's step; made after it, it has the request's id (unbound by
    then) and the time the request ended, not the time it was written."""
    written = io.BytesIO()
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(written, write_through=True))
    configure_logging("info", json=True)
    try:
        from gateway.observability import logs

        assert logs._direct is not None
        output = logs._direct[1]
        trail = AuditTrail(AuditSettings())
        bound = bind_request(9, "prompts/get")
        began = time.time()
        try:
            with trail.request(Identity.token("ci"), "prompts/get", {"name": "team__deploy"}, "team"):
                pass
            ended = time.time()
        finally:
            unbind_request(bound)
        output.flush()
        assert b"audit" not in written.getvalue()  # not made during the request's step
        await asyncio.sleep(0)  # the next step of the loop: the work handed over runs first
        output.flush()
        line = json.loads(written.getvalue().splitlines()[-1])
    finally:
        structlog.reset_defaults()
    assert line["event"] == "audit"
    assert line["request_id"] == 9
    assert line["method"] == "prompts/get"
    assert line["prompt"] == "team__deploy"
    stamped = datetime.datetime.fromisoformat(line["timestamp"]).timestamp()
    assert began - 1e-3 <= stamped <= ended + 1e-3  # taken when the request ended (to the microsecond)


@pytest.mark.anyio
async def test_a_failure_is_logged_as_no_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The work of several requests runs in one callback: what it logs is not the first request's."""
    written = io.BytesIO()
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(written, write_through=True))
    configure_logging("info", json=True)
    # a fresh logger: the module's caches the output it first wrote to (an earlier test's stderr)
    monkeypatch.setattr(after_answer, "log", structlog.get_logger("gateway.observability"))
    done = asyncio.Event()

    def fails() -> None:
        raise RuntimeError("broken bookkeeping")

    try:
        from gateway.observability import logs

        assert logs._direct is not None
        bound = bind_request(1, "prompts/get")
        later(lambda: None)  # the first request's work schedules the run
        unbind_request(bound)
        bound = bind_request(2, "prompts/get")
        later(fails)
        later(done.set)
        unbind_request(bound)
        await asyncio.wait_for(done.wait(), 10)
        logs._direct[1].flush()
    finally:
        structlog.reset_defaults()
    failed = [json.loads(line) for line in written.getvalue().splitlines() if b"bookkeeping_failed" in line]
    assert len(failed) == 1
    assert "request_id" not in failed[0]
    assert "broken bookkeeping" in failed[0]["exception"]


def test_after_an_interrupt_the_rest_runs_next() -> None:
    loop = asyncio.new_event_loop()
    done: list[str] = []

    def interrupted() -> None:
        raise KeyboardInterrupt

    try:
        after_answer._pending[loop] = [(done.append, ("before",)), (interrupted, ()), (done.append, ("after",))]
        with pytest.raises(KeyboardInterrupt):
            after_answer.run_pending(loop)
        assert done == ["before"]
        loop.run_until_complete(asyncio.sleep(0))  # the loop's next step
        assert done == ["before", "after"]
        assert loop not in after_answer._pending
    finally:
        loop.close()


def test_each_loop_runs_its_own_work_on_its_own_thread() -> None:
    """Two loops in two threads (an embedding application, a test client beside a test's loop): each
    request's bookkeeping runs on the thread of the loop that served it."""
    ran_on: dict[str, list[int]] = {"a": [], "b": []}
    serving_thread: dict[str, int] = {}
    both_queued = threading.Barrier(2)

    def serve(name: str) -> None:
        async def main() -> None:
            serving_thread[name] = threading.get_ident()
            done = asyncio.Event()
            for _ in range(100):
                later(lambda: ran_on[name].append(threading.get_ident()))
            later(done.set)
            both_queued.wait(10)  # (blocking this loop on purpose: the other has queued its work too)
            await asyncio.wait_for(done.wait(), 10)

        asyncio.run(main())

    threads = [threading.Thread(target=serve, args=(name,)) for name in ran_on]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for name, idents in ran_on.items():
        assert idents == [serving_thread[name]] * 100
