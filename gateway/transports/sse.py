"""Server-sent events, server side: a bounded, numbered log of outgoing frames per session, and the
wire encoding. (Parsing SSE, client side, is httpx-sse's job.)

Numbered events let a client that lost its stream resume with ``Last-Event-ID``: whatever is still in
the log after that id is replayed. The log is bounded, so a client that never reads costs a fixed
amount of memory: the oldest events are dropped first.
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import anyio

KEEPALIVE_S = 15.0


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    data: bytes
    key: str | None = None


def encode_event(data: bytes, *, event_id: int | None = None, event: str = "message") -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    lines = b"".join(b"data: " + line + b"\n" for line in data.split(b"\n"))
    return f"{head}event: {event}\n".encode() + lines + b"\n"


KEEPALIVE = b": keep-alive\n\n"


EPOCH_SCALE = 10**9
"""Event ids are ``(epoch + 1) * EPOCH_SCALE + block + n`` where an epoch is known (replicas sharing Redis
count the catalog's changes: another replica can tell from a client's Last-Event-ID whether a change came
since), else ``block + n``. ``block`` (a random multiple of ``BLOCK_SIZE``, one per log) keeps one session's
logs on two replicas apart, and ``issued`` takes only ids of its own block: numbered alike, a replica took
another's id for one it had issued itself and replayed nothing, where the client was owed a list_changed
(an operator's tester, after Redis restarted and the epoch went back)."""
BLOCK_SIZE = 10**6
BLOCKS = 999  # (block + n stays below EPOCH_SCALE for a million events an epoch: the epoch read back is its own)


def epoch_of(event_id: int) -> int | None:
    return event_id // EPOCH_SCALE - 1 if event_id >= EPOCH_SCALE else None


class EventLog:
    def __init__(
        self, max_events: int = 256, *, epoch: Callable[[], int | None] = lambda: None, block: int | None = None
    ) -> None:
        self._events: deque[Event] = deque(maxlen=max_events)
        self._epoch = epoch
        self._block = (secrets.randbelow(BLOCKS) if block is None else block) * BLOCK_SIZE
        self._next_id = self._block + 1
        self._first_id: int | None = None
        self._delivered = 0
        self._changed = anyio.Event()
        self.closed = False

    def push(self, data: bytes, *, key: str | None = None) -> bool:
        """Queue a frame without blocking. With a ``key``, a frame is skipped while an earlier one with the
        same key is still undelivered (list_changed: one pending notification says it all)."""
        if self.closed:
            return False
        if key is not None and any(e.key == key for e in self._events if e.id > self._delivered):
            return False
        epoch = self._epoch()
        event_id = self._next_id if epoch is None else max(self._next_id, (epoch + 1) * EPOCH_SCALE + self._block + 1)
        if self._first_id is None:
            self._first_id = event_id
        self._events.append(Event(event_id, data, key))
        self._next_id = event_id + 1
        self._wake()
        return True

    def issued(self, event_id: int) -> bool:
        """Whether this log numbered ``event_id`` (a client's Last-Event-ID from another replica was not):
        one of its block, in the run of ids it gave out."""
        if event_id == 0:
            return True
        own_block = event_id % EPOCH_SCALE // BLOCK_SIZE == self._block // BLOCK_SIZE
        return own_block and self._first_id is not None and self._first_id <= event_id < self._next_id

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def follow(self, after: int | None = None) -> AsyncIterator[Event | None]:
        """Events after ``after`` (replayed, then live) until closed; None every KEEPALIVE_S of silence."""
        position = self._delivered if after is None else after
        while True:
            for event in [e for e in self._events if e.id > position]:
                position = event.id
                self._delivered = max(self._delivered, event.id)
                yield event
            if self.closed:
                return
            changed = self._changed
            with anyio.move_on_after(KEEPALIVE_S) as waited:
                await changed.wait()
            if waited.cancelled_caught:
                yield None
