"""The composite cursor: where a gateway listing continues, for every upstream at once.

Per upstream (in config order) it holds the upstream's own opaque cursor for the page being read and
how many of that page's prompts were already served (a ``page_size`` cap can split an upstream page),
or "done". It is bound to the config generation, HMAC-signed and size-bounded, so any replica that
shares the secret can continue it and no one else can forge, splice or replay it across layouts.

Wire form: base64url(version byte | 16-byte HMAC-SHA256 tag | compact JSON), unpadded.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass

from gateway.errors import InvalidCursor

_VERSION = 1
_TAG_BYTES = 16
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
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _tag(self, body: bytes) -> bytes:
        return hmac.new(self._secret, body, hashlib.sha256).digest()[:_TAG_BYTES]

    def encode(self, position: ListingPosition) -> str:
        payload = {
            "g": position.generation,
            "u": [None if p is None else [p.cursor, p.offset] for p in position.upstreams],
        }
        body = bytes([_VERSION]) + json.dumps(payload, separators=(",", ":")).encode()
        token = base64.urlsafe_b64encode(body[:1] + self._tag(body) + body[1:]).rstrip(b"=").decode()
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
        if len(raw) < 1 + _TAG_BYTES or raw[0] != _VERSION:
            raise InvalidCursor("unknown version")
        tag, body = raw[1 : 1 + _TAG_BYTES], raw[:1] + raw[1 + _TAG_BYTES :]
        if not hmac.compare_digest(tag, self._tag(body)):
            raise InvalidCursor("bad signature")
        try:
            payload = json.loads(body[1:])
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
