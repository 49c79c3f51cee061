"""The peers' request deadlines on one timer: each request is cancelled at its own deadline, never one
that ended, with one timer armed however many requests are pending."""

from __future__ import annotations

import asyncio

import pytest

from gateway.deadlines import Deadlines


async def _wait(deadlines: Deadlines, key: int, timeout: float, ended: dict[int, str], release: asyncio.Event) -> None:
    deadline = deadlines.add(key, timeout)
    try:
        await release.wait()
        ended[key] = "answered"
    except asyncio.CancelledError:
        if deadline.expired():
            ended[key] = "timed out"
            return
        ended[key] = "cancelled"
        raise
    finally:
        deadlines.remove(key, timeout)


def test_each_request_times_out_at_its_own_deadline_and_an_answered_one_never() -> None:
    async def scenario() -> tuple[dict[int, str], list[float]]:
        deadlines, ended, release = Deadlines(), {}, asyncio.Event()
        loop = asyncio.get_running_loop()
        started = loop.time()
        answered = asyncio.create_task(_wait(deadlines, 0, 0.05, ended, asyncio.Event()))
        short = [asyncio.create_task(_wait(deadlines, k, 0.05, ended, release)) for k in (1, 2)]
        long = asyncio.create_task(_wait(deadlines, 3, 0.4, ended, release))
        other = asyncio.create_task(_wait(deadlines, 4, 0.1, ended, release))  # a second time-out value
        await asyncio.sleep(0)
        deadlines.remove(0, 0.05)  # as if answered before its deadline
        answered.cancel()  # (its caller's own cancellation: not a time-out)
        times: list[float] = []
        for task in (*short, other):
            await task
            times.append(loop.time() - started)
        release.set()
        await long
        return ended, times

    ended, times = asyncio.run(scenario())
    assert ended == {0: "cancelled", 1: "timed out", 2: "timed out", 4: "timed out", 3: "answered"}
    assert times[0] >= 0.05 - 0.002
    assert times[2] >= 0.1 - 0.002


def test_a_task_cancelled_by_its_caller_as_well_is_not_a_time_out() -> None:
    """Two cancellations (the deadline's and the caller's): the request goes on being cancelled."""

    async def scenario() -> None:
        deadlines = Deadlines()
        entered = asyncio.Event()

        async def request() -> None:
            deadline = deadlines.add("k", 0.01)
            entered.set()
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                assert not deadline.expired()
                raise

        task = asyncio.create_task(request())
        await entered.wait()
        task.cancel()  # the caller's, before the deadline passes
        await asyncio.sleep(0.05)  # the deadline passes too while the task is still being cancelled
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
