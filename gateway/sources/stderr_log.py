"""An upstream's stderr, logged line by line within a bound: a server that floods its stderr (a tester's
wrote 25 MB a second of it) must not fill the disk or the journal, nor take the gateway's CPU.

Lines past ``STDERR_LINES_PER_S`` a second are counted, not logged; the next line logged after them
says how many were left out (``upstream_stderr_dropped``). The last lines are kept apart, all of them, for
the message that says why a server exited (``supervision.py``). The counting is the ``limits`` package's
(the one ``[limits]`` uses), in memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from limits import RateLimitItem
    from limits.strategies import FixedWindowRateLimiter

STDERR_LINES_PER_S = 100
_limiter: list[tuple[FixedWindowRateLimiter, RateLimitItem]] = []
"""Made at the first stderr line: the package is imported (and its storage's timer thread started) only by a
gateway whose upstreams write some, as ``[limits]`` imports it only where limits are set."""


def _shared_limiter() -> tuple[FixedWindowRateLimiter, RateLimitItem]:
    if not _limiter:
        from limits import parse
        from limits.storage import MemoryStorage
        from limits.strategies import FixedWindowRateLimiter

        _limiter.append((FixedWindowRateLimiter(MemoryStorage()), parse(f"{STDERR_LINES_PER_S}/second")))
    return _limiter[0]


class StderrLog:
    """One upstream's stderr lines, logged within the bound."""

    __slots__ = ("_dropped", "_key", "_log")

    def __init__(self, log: Any) -> None:
        self._log = log
        self._key = f"stderr-{id(self)}"
        self._dropped = 0

    def line(self, line: str) -> None:
        limiter, rate = _shared_limiter()
        if not limiter.hit(rate, self._key):
            self._dropped += 1
            return
        if self._dropped:
            self._log.warning("upstream_stderr_dropped", lines=self._dropped, limit_per_s=STDERR_LINES_PER_S)
            self._dropped = 0
        self._log.info("upstream_stderr", line=line)
