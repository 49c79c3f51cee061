"""A reload's ``[gateway]`` bounds reach a running upstream without a reconnect (``UpstreamConnector.retune``),
and the restarts counted so far carry over: a reviewer's crash-looping upstream (``max_restarts = 3``)
never reached ``failed`` while a reload that changed only a policy came every few seconds."""

from __future__ import annotations

import pytest

from gateway.config import StdioUpstream
from gateway.sources.backoff import Backoff
from gateway.sources.upstream import UpstreamConnector


def connector() -> UpstreamConnector:
    settings = StdioUpstream(namespace="crashy", command="false")
    backoff = Backoff(0.5, 30, 3)
    return UpstreamConnector(settings, on_change=lambda *_: None, max_message_bytes=1 << 20, backoff=backoff)


@pytest.mark.anyio
async def test_a_reload_that_changes_no_restart_bound_keeps_the_count() -> None:
    up = connector()
    counting = up._backoff
    counting.attempt = 2
    up.retune(backoff=Backoff(0.5, 30, 3), max_in_flight=8, stable_after_s=10)
    assert up._backoff is counting
    assert (up._backoff.next_delay() is not None, up._backoff.next_delay()) == (True, None)  # third, then given up
    assert up._max_in_flight == 8


@pytest.mark.anyio
async def test_new_restart_bounds_take_the_count_so_far_along() -> None:
    up = connector()
    up._backoff.attempt = 2
    up.retune(backoff=Backoff(0.1, 1, 5), max_in_flight=256, stable_after_s=10)
    assert (up._backoff.max_s, up._backoff.max_attempts, up._backoff.attempt) == (1, 5, 2)
