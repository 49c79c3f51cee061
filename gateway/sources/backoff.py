"""How long to wait before trying an upstream again: exponential backoff with full jitter, capped, and
reset once a connection has proved itself."""

from __future__ import annotations

import random


class Backoff:
    """Exponential backoff with full jitter, capped; resets after a connection that stayed up."""

    def __init__(self, initial_s: float = 0.5, max_s: float = 30.0, max_attempts: int | None = None) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self.max_attempts = max_attempts
        self.attempt = 0

    def next_delay(self) -> float | None:
        """Seconds to wait before the next attempt, or None to give up."""
        self.attempt += 1
        if self.max_attempts is not None and self.attempt > self.max_attempts:
            return None
        ceiling = min(self.max_s, self.initial_s * 2 ** (self.attempt - 1))
        return random.uniform(ceiling / 2, ceiling)  # noqa: S311 - jitter, not cryptography

    def reset(self) -> None:
        self.attempt = 0
