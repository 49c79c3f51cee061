"""A global bound with a per-identity share inside it: what one token (later, one person) holds can never
use up what every other caller needs. Sans-IO: the HTTP front end counts its sessions, its stateless
requests and its streams each in one of these.
"""

from __future__ import annotations

from collections.abc import Hashable


class FairShare:
    """Up to ``total`` held at once, and up to ``per_identity`` of them by any one identity (None: no
    share, only the total: every caller is one identity, as without tokens)."""

    def __init__(self, total: int, per_identity: int | None) -> None:
        self.total = total
        self.per_identity = per_identity
        self.held: dict[Hashable, int] = {}  # (a plain dict: Counter's __missing__ is a call per request)
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def refusal(self, identity: Hashable) -> str | None:
        """Why one more for ``identity`` would be over a bound, or None when there is room."""
        if self.per_identity is not None and self.held.get(identity, 0) >= self.per_identity:
            return f"this identity holds {self.per_identity}, its share"
        if self._count >= self.total:
            return f"{self.total} are held in all"
        return None

    def acquire(self, identity: Hashable) -> None:
        self.held[identity] = self.held.get(identity, 0) + 1
        self._count += 1

    def release(self, identity: Hashable) -> None:
        self._count -= 1
        held = self.held.get(identity, 0) - 1
        if held > 0:
            self.held[identity] = held
        else:
            self.held.pop(identity, None)

    def largest_holder(self) -> Hashable | None:
        """The identity holding the most (where room is made first when the total is reached)."""
        return max(self.held, key=self.held.__getitem__) if self.held else None


def default_share(total: int, identities: int) -> int | None:
    """A quarter of the total when there are identities to tell apart (several tokens), else no share."""
    return max(1, total // 4) if identities > 1 else None
