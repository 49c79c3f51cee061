"""An upstream's stderr logged within a bound (``stderr_log.py``): a tester's server wrote 25 MB of stderr
a second, and each line became a log event (1.1 GB in 50 s)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from gateway.sources.stderr_log import STDERR_LINES_PER_S, StderrLog


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.seen.append((event, fields))

    warning = info


def test_a_flood_is_logged_up_to_the_bound_and_what_was_left_out_is_counted() -> None:
    events = Events()
    stderr = StderrLog(events)
    for n in range(10 * STDERR_LINES_PER_S):  # far faster than the bound: all within one second here
        stderr.line(f"line {n}")
    logged = [fields["line"] for event, fields in events.seen if event == "upstream_stderr"]
    assert STDERR_LINES_PER_S <= len(logged) <= 2 * STDERR_LINES_PER_S  # (a window may turn meanwhile)
    assert logged[:3] == ["line 0", "line 1", "line 2"]
    other = StderrLog(events)  # each upstream has its own share
    other.line("another server's line")
    assert events.seen[-1] == ("upstream_stderr", {"line": "another server's line"})


def test_the_next_line_logged_after_a_flood_says_how_many_were_left_out(monkeypatch: Any) -> None:
    """(The window's clock is the storage's ``time.time``: moved on here rather than waited for.)"""
    import limits.storage.memory

    now = [1_000_000.0]
    monkeypatch.setattr(limits.storage.memory, "time", SimpleNamespace(time=lambda: now[0]))
    events = Events()
    stderr = StderrLog(events)
    for n in range(STDERR_LINES_PER_S + 25):
        stderr.line(f"line {n}")
    now[0] += 2  # the next window
    stderr.line("calm again")
    assert events.seen[-2:] == [
        ("upstream_stderr_dropped", {"lines": 25, "limit_per_s": STDERR_LINES_PER_S}),
        ("upstream_stderr", {"line": "calm again"}),
    ]
