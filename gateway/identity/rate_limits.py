"""Rate limits per identity, by the ``limits`` library: which limits a request counts against (its
identity's rate and burst, its method's rate, the global rate), counted in memory or, with ``[cluster]
redis_url``, in Redis so that every replica counts the same requests.

Identities are typed (``Identity.key``): a static token named ``ci`` and an access token whose subject is
``ci`` are counted apart. Redis lost (or slower than ``storage_timeout_s``) → this replica counts alone in
memory, logged once, and tries Redis again after ``RETRY_REDIS_S``: nothing ever waits on Redis longer.
The counts outlive a reload (the storage is kept; only which limits apply is read afresh), a changed
amount included: the counts are keyed by identity, limit and window, not amount (``_counted_by_window``).
A changed window starts that limit's counts afresh: hits counted in one window say nothing of another.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import structlog

from gateway.config import LimitsSettings, TokenSettings, ViewSettings
from gateway.identity.principal import Identity
from gateway.identity.views import matches
from gateway.protocol.errors import RateLimited

if TYPE_CHECKING:  # the library itself is imported once a limit is set (~30 ms of every start otherwise)
    from limits import RateLimitItem
    from limits.aio.storage import Storage
    from limits.aio.strategies import RateLimiter

log = structlog.get_logger("gateway.limits")

RETRY_REDIS_S = 5.0
UNCOUNTED = frozenset({"initialize", "server/discover", "ping"})
"""What connecting and keeping alive takes: answered by the gateway itself, never sent upstream, and bounded
by the session limits; counting them made a client's connection spend its rate (an SDK client discovers
on every connection, then initializes when the discover is refused)."""
ANONYMOUS = "anonymous"
"""Who an unauthenticated HTTP caller is counted as: all of them together, as one identity."""


@dataclass(frozen=True)
class _Limit:
    label: str  # what the error and the audit name: "rate", "burst", "prompts/get", "global"
    items: tuple[RateLimitItem, ...]


class Counts:
    """Where the hits are counted: Redis when configured and answering, else this process's memory. Kept
    across reloads (the limits change, the counts so far stay)."""

    def __init__(self, redis_url: str | None, timeout_s: float) -> None:
        self.redis_url = redis_url
        self.timeout_s = timeout_s
        self._redis_down_until = 0.0
        self._storages: tuple[Storage, Storage | None] | None = None

    @property
    def memory(self) -> Storage:
        return self._storage()[0]

    @property
    def redis(self) -> Storage | None:
        return self._storage()[1]

    def _storage(self) -> tuple[Storage, Storage | None]:
        """Made when the first limit is set, and kept from then on (through every reload)."""
        if self._storages is None:
            from limits.aio.storage import MemoryStorage, RedisStorage

            redis = (
                RedisStorage(
                    self.redis_url, implementation="redispy", wrap_exceptions=True, key_prefix="prompt-gateway-limits"
                )
                if self.redis_url is not None
                else None
            )
            self._storages = (MemoryStorage(), redis)
        return self._storages

    async def aclose(self) -> None:
        """Close the connections to Redis. The library offers no close of its own: its redis-py client is
        reached through the storage's bridge (limits 5)."""
        client = getattr(getattr(self.redis if self._storages else None, "bridge", None), "storage", None)
        if client is not None:
            await client.aclose()

    def usable_redis(self) -> Storage | None:
        return self.redis if self.redis is not None and time.monotonic() >= self._redis_down_until else None

    def redis_failed(self, exc: BaseException | None) -> None:
        if self._redis_down_until <= time.monotonic():
            log.warning("rate_limit_redis_unavailable", error=type(exc).__name__ if exc else "timeout", alone=True)
        self._redis_down_until = time.monotonic() + RETRY_REDIS_S


class RateLimits:
    def __init__(
        self,
        settings: LimitsSettings,
        counts: Counts,
        *,
        tokens: Sequence[TokenSettings] = (),
        views: Sequence[ViewSettings] = (),
    ) -> None:
        self.settings = settings
        self._counts = counts
        self._default = _limit("rate", settings.rate)
        self._burst = _limit("burst", settings.burst)
        self._global = _limit("global", settings.global_rate)
        self._methods: dict[str, _Limit | None] = {m: _limit(m, rate) for m, rate in settings.methods.items()}
        self._token_rates = {t.name: _limit("rate", t.rate) for t in tokens if t.rate is not None}
        self._view_rates = [(v.match, _limit("rate", v.rate)) for v in views if v.rate is not None]
        self.active = any(
            (self._default, self._burst, self._global, self._methods, self._token_rates, self._view_rates)
        )
        """Whether any limit is set: without one, a request is not counted at all."""
        self._in_memory: RateLimiter | None = None
        self._in_redis: RateLimiter | None = None
        if self.active:
            strategy = _strategy(settings.strategy)
            self._in_memory = strategy(counts.memory)
            self._in_redis = strategy(counts.redis) if counts.redis is not None else None

    def limits_for(self, who: Identity | None, method: str, also: str | None = None) -> list[tuple[_Limit, str]]:
        """The limits a request of ``who`` for ``method`` counts against, each with the key it is
        counted under; its own first, the global bound last (a request refused by its identity's limit
        does not use up what everyone shares). ``also``: the method it is served as (a ``get_prompt``
        tool call is a ``prompts/get``: a tester got past that limit through the tool)."""
        key = who.key if who is not None else ANONYMOUS
        own = self._rate_of(who)
        found = [(limit, key) for limit in (own, self._burst) if limit is not None]
        for counted in (method, also):
            method_limit = self._methods.get(counted) if counted is not None else None
            if method_limit is not None:
                found.append((method_limit, f"{key}|{counted}"))
        if self._global is not None:
            found.append((self._global, "*"))
        return found

    def _rate_of(self, who: Identity | None) -> _Limit | None:
        if who is not None and who.kind == "token" and who.name in self._token_rates:
            return self._token_rates[who.name]
        if who is not None and who.kind == "oauth" and who.claims is not None:
            for match, limit in self._view_rates:
                if matches(match, who.claims):
                    return limit
        return self._default

    async def admit(self, who: Identity | None, method: str, *, also: str | None = None) -> None:
        """Count one request; RateLimited (with how long to wait) if it is over a limit."""
        in_memory = self._in_memory
        if method in UNCOUNTED or in_memory is None:
            return
        for limit, key in self.limits_for(who, method, also):
            for item in limit.items:
                retry_after = await self._hit(in_memory, item, limit.label, key)
                if retry_after is not None:
                    raise RateLimited(limit.label, retry_after)

    async def _hit(self, in_memory: RateLimiter, item: RateLimitItem, label: str, key: str) -> float | None:
        """None when under the limit, else the seconds until it has room again."""
        if self._in_redis is not None and self._counts.usable_redis() is not None:
            try:
                with anyio.fail_after(self._counts.timeout_s):
                    return await self._hit_in(self._in_redis, item, label, key)
            except Exception as exc:
                self._counts.redis_failed(exc if not isinstance(exc, TimeoutError) else None)
        return await self._hit_in(in_memory, item, label, key)

    @staticmethod
    async def _hit_in(limiter: RateLimiter, item: RateLimitItem, label: str, key: str) -> float | None:
        if await limiter.hit(item, label, key):
            return None
        stats = await limiter.get_window_stats(item, label, key)
        return max(0.0, stats.reset_time - time.time())


def _limit(label: str, rate: str | None) -> _Limit | None:
    """The items of ``rate``, each counted under a key naming its window but not its amount; where two
    share a window, the smaller amount is the one that binds, and the only one kept (they would share
    a key, and a hit would be counted twice)."""
    if rate is None:
        return None
    from limits import parse_many

    smallest: dict[tuple[int, str], RateLimitItem] = {}
    for item in parse_many(rate):
        window = (item.multiples, item.GRANULARITY.name)
        if window not in smallest or item.amount < smallest[window].amount:
            smallest[window] = item
    return _Limit(label, tuple(_counted_by_window(item) for item in smallest.values()))


_BY_WINDOW: dict[type[RateLimitItem], type[RateLimitItem]] = {}


def _counted_by_window(item: RateLimitItem) -> RateLimitItem:
    """``item``, with a key that leaves its amount out. The library's own key holds the amount
    (``LIMITER/rate/token:ci/600/1/minute``), so a reload that changed ``600/minute`` to
    ``900/minute`` counted every identity afresh; keyed by the window alone, the new amount is
    compared with the hits counted so far, in memory and in Redis alike (docs/limits.md). Every
    strategy keys its counts by ``key_for`` and is handed the amount apart, so nothing else changes."""
    kind = _BY_WINDOW.get(type(item))
    if kind is None:
        kind = _BY_WINDOW[type(item)] = type(f"ByWindow{type(item).__name__}", (type(item),), {"key_for": _window_key})
    return kind(item.amount, item.multiples, item.namespace)


def _window_key(item: RateLimitItem, *identifiers: bytes | str | int | float) -> str:
    from limits.limits import safe_string

    window = [safe_string(item.multiples), item.GRANULARITY.name]
    return "/".join([item.namespace, *(safe_string(k) for k in identifiers), *window])


def _strategy(name: str) -> type[RateLimiter]:
    from limits.aio.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter, SlidingWindowCounterRateLimiter

    strategies: dict[str, type[RateLimiter]] = {
        "moving-window": MovingWindowRateLimiter,
        "sliding-window-counter": SlidingWindowCounterRateLimiter,
        "fixed-window": FixedWindowRateLimiter,
    }
    return strategies[name]


def retry_after_header(seconds: float) -> str:
    """``Retry-After`` in whole seconds, never 0 (a client told 0 comes straight back)."""
    return str(max(1, math.ceil(seconds)))
