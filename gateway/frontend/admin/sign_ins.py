"""The operator page's sign-ins: the cookie a sign-in leaves, the sign-outs that end one before it
expires (on every replica, with ``[cluster] redis_url``), and the bound on wrong tokens per client
address (the ``limits`` library counts them).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import string
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import structlog

if TYPE_CHECKING:
    from limits.aio.strategies import MovingWindowRateLimiter

log = structlog.get_logger("gateway.admin")

COOKIE_MAX_AGE_S = 12 * 3600
CLOCK_SKEW_S = 60
MAX_SIGN_OUTS_KEPT = 10_000
"""Sign-outs remembered in memory at most; past it the oldest gives way to a floor (see ``SignOuts``)."""
_ID_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-_")


@dataclass(frozen=True, slots=True)
class SignIn:
    id: str
    issued: int


def new_sign_in(now: float) -> SignIn:
    return SignIn(secrets.token_urlsafe(12), int(now))


def cookie_value(token: str, sign_in: SignIn) -> str:
    """What the sign-in cookie holds: when it was issued, its random id and a MAC of both under the
    token, never the token (a cookie store, a proxy's log or a browser's devtools then never show it).
    Changing the token ends every sign-in; so does the cookie's age, checked here and not only by the
    browser's Max-Age; so does signing out, which records the id."""
    message = f"prompt-gateway operator page|{sign_in.issued}|{sign_in.id}".encode()
    mac = hmac.new(token.encode(), message, hashlib.sha256).hexdigest()
    return f"{sign_in.issued}.{sign_in.id}.{mac}"


def sign_in_of(cookie: str, token: str, now: float) -> SignIn | None:
    """The sign-in ``cookie`` holds if it was issued for ``token`` at most ``COOKIE_MAX_AGE_S`` before ``now``."""
    parts = cookie[:200].split(".")
    if len(parts) != 3:
        return None
    issued_text, sign_in_id, _ = parts
    if not issued_text.isascii() or not issued_text.isdigit() or len(issued_text) > 12:
        return None
    if not 0 < len(sign_in_id) <= 64 or not _ID_CHARACTERS.issuperset(sign_in_id):
        return None
    sign_in = SignIn(sign_in_id, int(issued_text))
    if not now - COOKIE_MAX_AGE_S <= sign_in.issued <= now + CLOCK_SKEW_S:
        return None
    return sign_in if hmac.compare_digest(cookie.encode(), cookie_value(token, sign_in).encode()) else None


def cookie_valid(cookie: str, token: str, now: float) -> bool:
    return sign_in_of(cookie, token, now) is not None


class SharedSignOuts(Protocol):
    """Where replicas record sign-outs (the cluster: Redis, or nothing for a gateway alone)."""

    async def signed_out(self, sign_in: str, ttl_s: float) -> None: ...

    async def is_signed_out(self, sign_in: str) -> bool: ...


class SignOuts:
    """Sign-ins ended before their cookie expires: kept here, and shared with the other replicas when
    there are any (Redis out of reach, each replica still refuses what it was told itself).

    Memory is bounded: a record lapses when its cookie would have expired anyway, and past
    ``MAX_SIGN_OUTS_KEPT`` the oldest sign-in gives way to a floor: every sign-in issued at or before it
    is refused (more are signed out than asked, never fewer)."""

    def __init__(self, shared: SharedSignOuts, kept: int = MAX_SIGN_OUTS_KEPT) -> None:
        self._shared = shared
        self._kept = kept
        self._ended: dict[str, int] = {}  # sign-in id -> issued, in order of signing out
        self._floor = -1

    def __len__(self) -> int:
        return len(self._ended)

    async def sign_out(self, sign_in: SignIn, now: float) -> None:
        self._forget_lapsed(now)
        if len(self._ended) >= self._kept:
            oldest = min(self._ended, key=self._ended.__getitem__)
            self._floor = max(self._floor, self._ended.pop(oldest))
        self._ended[sign_in.id] = sign_in.issued
        await self._shared.signed_out(sign_in.id, sign_in.issued + COOKIE_MAX_AGE_S + CLOCK_SKEW_S - now)

    async def ended(self, sign_in: SignIn) -> bool:
        if sign_in.issued <= self._floor or sign_in.id in self._ended:
            return True
        return await self._shared.is_signed_out(sign_in.id)

    def _forget_lapsed(self, now: float) -> None:
        for sign_in_id, issued in list(self._ended.items()):
            if issued + COOKIE_MAX_AGE_S < now:
                del self._ended[sign_in_id]


class SignInFailures:
    """Wrong tokens per client address, a moving window of the ``limits`` library in this process's
    memory: past the rate every sign-in from that address is refused (the right token too, or guessing
    would go on and tell a hit by its answer) until the window moves on."""

    def __init__(self, rate: str) -> None:
        from limits import parse_many
        from limits.aio.storage import MemoryStorage
        from limits.aio.strategies import MovingWindowRateLimiter

        self._items = parse_many(rate)
        self._limiter: MovingWindowRateLimiter = MovingWindowRateLimiter(MemoryStorage())

    async def retry_after(self, address: str) -> int | None:
        """Seconds until ``address`` may try again, or None if it may now."""
        waits = []
        for item in self._items:
            if not await self._limiter.test(item, "admin-sign-in", address):
                stats = await self._limiter.get_window_stats(item, "admin-sign-in", address)
                waits.append(max(1, math.ceil(stats.reset_time - time.time())))
        return max(waits) if waits else None

    async def failed(self, address: str) -> None:
        for item in self._items:
            await self._limiter.hit(item, "admin-sign-in", address)
