"""The composite cursor: where a gateway listing continues, for every upstream at once.

Per upstream (in config order) it holds the upstream's own opaque cursor for the page being read and
how many of that page's prompts were already served (a ``page_size`` cap can split an upstream page),
or "done". It is bound to the config generation, sealed (encrypted and authenticated, see
``sealing.py``) and size-bounded, so any replica that shares the secrets can continue it, and no client
can forge, splice or replay it across layouts, nor read it: upstream cursors can carry prompt names
that policy hides. The plaintext is padded to a multiple of 128 bytes, so the length does not tell how
many upstreams there are either.

Wire form: base64url(version byte | sealed(compact JSON, padded with spaces)), unpadded.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.cluster.sealing import Sealer
from gateway.protocol.errors import InvalidCursor

_VERSION = 2  # 1 was HMAC-signed plain JSON
_HEADER = bytes([_VERSION])
_PAD_TO = 128
MAX_CURSOR_CHARS = 64 * 1024


@dataclass(frozen=True, slots=True)
class PagePosition:
    cursor: str | None  # the upstream cursor of the page to read (None: its first page)
    offset: int = 0  # prompts of that page already served


START = PagePosition(None, 0)


@dataclass(frozen=True, slots=True)
class ListingPosition:
    generation: str
    upstreams: tuple[PagePosition | None, ...]  # None: that upstream is exhausted

    @property
    def finished(self) -> bool:
        return all(p is None for p in self.upstreams)


class CursorTooLarge(Exception):
    """The upstreams' own cursors do not fit into a bounded composite cursor."""


class CursorCodec:
    """``secrets``: the first seals, every one opens (rotation). One secret alone may be given as bytes."""

    def __init__(self, secrets: bytes | Sequence[bytes]) -> None:
        self._sealer = Sealer([secrets] if isinstance(secrets, bytes) else list(secrets), purpose=b"cursor")

    def encode(self, position: ListingPosition) -> str:
        payload = {
            "g": position.generation,
            "u": [None if p is None else [p.cursor, p.offset] for p in position.upstreams],
        }
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        body += b" " * (-len(body) % _PAD_TO)
        token = base64.urlsafe_b64encode(_HEADER + self._sealer.seal(body, header=_HEADER)).rstrip(b"=").decode()
        if len(token) > MAX_CURSOR_CHARS:
            raise CursorTooLarge(f"composite cursor of {len(token)} characters exceeds {MAX_CURSOR_CHARS}")
        return token

    def decode(self, token: object, *, generation: str, upstream_count: int) -> ListingPosition:
        """Raises InvalidCursor (-32602) for anything this gateway layout did not issue."""
        if not isinstance(token, str) or not token:
            raise InvalidCursor("not a non-empty string")
        if len(token) > MAX_CURSOR_CHARS:
            raise InvalidCursor("too long")
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError) as exc:
            raise InvalidCursor("not base64url") from exc
        if base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != token:
            raise InvalidCursor("not canonical base64url")  # no second spelling of one cursor
        if raw[:1] != _HEADER:
            raise InvalidCursor("unknown version")
        body = self._sealer.open(raw[1:], header=_HEADER)
        if body is None:
            raise InvalidCursor("bad seal")
        try:
            payload = json.loads(body)
        except ValueError as exc:
            raise InvalidCursor("unreadable payload") from exc
        return _position_from(payload, generation, upstream_count)


def _position_from(payload: object, generation: str, upstream_count: int) -> ListingPosition:
    if not isinstance(payload, dict) or payload.get("g") != generation:
        raise InvalidCursor("issued under another configuration")
    entries = payload.get("u")
    if not isinstance(entries, list) or len(entries) != upstream_count:
        raise InvalidCursor("wrong upstream count")
    positions: list[PagePosition | None] = []
    for entry in entries:
        if entry is None:
            positions.append(None)
            continue
        if not (isinstance(entry, list) and len(entry) == 2):
            raise InvalidCursor("malformed entry")
        cursor, offset = entry
        if not (cursor is None or isinstance(cursor, str)):
            raise InvalidCursor("malformed upstream cursor")
        if not (isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0):
            raise InvalidCursor("malformed offset")
        positions.append(PagePosition(cursor, offset))
    return ListingPosition(generation, tuple(positions))
