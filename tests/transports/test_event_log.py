"""The server-side SSE event log's numbering: ids that say the catalog's epoch where one is known."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.transports.sse import EPOCH_SCALE, EventLog, epoch_of


def test_without_an_epoch_ids_count_from_one_and_only_issued_ones_are_known() -> None:
    log = EventLog()
    assert log.issued(0)
    assert not log.issued(1)
    log.push(b"a")
    log.push(b"b")
    assert [log.issued(i) for i in (0, 1, 2, 3)] == [True, True, True, False]
    assert epoch_of(2) is None


@given(st.lists(st.integers(0, 50), min_size=1, max_size=30))
def test_ids_carry_the_epoch_and_always_increase(epochs: list[int]) -> None:
    current = iter(epochs)
    value = [0]

    def epoch() -> int:
        value[0] = max(value[0], next(current))  # the epoch never goes back (Redis INCR)
        return value[0]

    log = EventLog(max_events=1000, epoch=epoch)
    ids = []
    for _ in epochs:
        log.push(b"x")
        ids.append(log._next_id - 1)
    assert ids == sorted(set(ids))
    assert [epoch_of(i) for i in ids] == [max(epochs[: n + 1]) for n in range(len(epochs))]
    assert all(log.issued(i) for i in ids)
    assert not log.issued(ids[-1] + 1)
    assert not log.issued(EPOCH_SCALE // 2)  # another replica's small id
