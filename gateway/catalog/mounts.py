"""What the catalog is made of: each upstream mounted under its namespace (a ``PromptSource`` behind a
``Mount`` that names, tags and shows its prompts), the pages it answers, and the bookkeeping beside
them (per-mount state, one fetch for many askers, collisions, freshness). Sans-IO.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

import anyio
from pydantic import BaseModel

from gateway.catalog import overrides
from gateway.catalog.accepted import Accepted
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.policy import ALLOW_ALL, Rules, Viewer
from gateway.config import PromptOverride
from gateway.protocol.errors import UpstreamUnavailable
from gateway.sources.client_requests import ClientRequestRelay
from gateway.sources.progress import ProgressRelay

MAX_UPSTREAM_CURSOR_CHARS = 2048

MAX_INDEX_PAGES = 2000

MAX_INDEX_PROMPTS = 100_000

MAX_EMPTY_ROUNDS = 32

MISS_REFRESH_INTERVAL_S = 1.0


_T = TypeVar("_T")
_Result = TypeVar("_Result", bound=BaseModel)


class PromptSource(Protocol):
    """What the catalog needs from an upstream connector (or an in-memory fake)."""

    namespace: str

    @property
    def ready(self) -> bool: ...

    @property
    def announces_list_changes(self) -> bool: ...

    @property
    def completes(self) -> bool: ...

    async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]: ...

    def unavailable(self) -> UpstreamUnavailable:
        """The error for a caller while it is not ready, saying why (still starting, down, given up)."""
        ...


@dataclass(frozen=True)
class Mount:
    """An upstream as the catalog sees it: where its names live, which of them it may show, and how."""

    source: PromptSource
    prefix: str  # "<namespace><sep>", or "" for an unprefixed mount
    rules: Rules = ALLOW_ALL  # the upstream's own policy, on its own names
    overrides: Mapping[str, PromptOverride] = field(default_factory=dict)  # by the upstream's own names
    _renamed: dict[str, str] = field(init=False, repr=False, compare=False)  # public name -> own name

    def __post_init__(self) -> None:
        renamed = {o.name: local for local, o in self.overrides.items() if o.name is not None}
        object.__setattr__(self, "_renamed", renamed)

    @property
    def namespace(self) -> str:
        return self.source.namespace

    @property
    def renames(self) -> bool:
        return bool(self._renamed)

    @property
    def own_tags(self) -> bool:
        """Whether the source's tags count: only the gateway's own sources (prompt files) set them."""
        return bool(getattr(self.source, "own_tags", False))

    def natural_name(self, local: str) -> str:
        """The public name before any rename."""
        return self.prefix + local

    def public_name(self, local: str) -> str:
        override = self.overrides.get(local)
        if override is not None and override.name is not None:
            return override.name
        return self.prefix + local

    def local_name(self, public: str) -> str | None:
        """The upstream's own name for a public name, or None when the name is not this mount's (a
        renamed prompt answers to its new name only)."""
        renamed = self._renamed.get(public)
        if renamed is not None:
            return renamed
        if self.prefix and not public.startswith(self.prefix):
            return None
        local = public[len(self.prefix) :]
        override = self.overrides.get(local)
        return None if override is not None and override.name is not None else local

    def claims(self, public: str) -> bool:
        """Whether a name can only be this mount's: under its prefix, or a name an override gave."""
        return public in self._renamed or bool(self.prefix and public.startswith(self.prefix))

    def tags(self, entry: Mapping[str, Any]) -> tuple[str, ...]:
        if not self.overrides and not self.own_tags:
            return ()
        return overrides.tags_of(entry, self.overrides.get(entry["name"]), own_tags=self.own_tags)

    def shown(self, entry: Mapping[str, Any], public: str, tags: tuple[str, ...]) -> dict[str, Any]:
        """The listing entry a client sees."""
        if not self.overrides and public == entry["name"] and (self.own_tags or "_meta" not in entry):
            return entry  # type: ignore[return-value] # the common case: nothing to change, no copy
        return overrides.listed(entry, public, self.overrides.get(entry["name"]), tags, own_tags=self.own_tags)


@dataclass(frozen=True, slots=True)
class Page:
    prompts: tuple[dict[str, Any], ...]
    next_cursor: str | None
    ttl_ms: int | None = None  # the upstream's freshness hint (2026-07-28 upstreams give one)
    private: bool = False
    fetched_at: float = 0.0

    def fresh_ms(self, now: float) -> float:
        assert self.ttl_ms is not None  # noqa: S101 - callers ask only pages that carry a hint
        return max(0.0, self.ttl_ms - (now - self.fetched_at) * 1000)


@dataclass
class _MountState:
    epoch: int = 0
    pages: dict[str | None, Page] = field(default_factory=dict)
    index: dict[str, dict[str, Any]] | None = None
    index_built_at: float = -math.inf
    logged_collisions: set[str] = field(default_factory=set)
    logged_refusals: set[str] = field(default_factory=set)
    accepts: dict[str, tuple[dict[str, Any], Accepted]] = field(default_factory=dict)  # by own name, with its entry


class _SingleFlight:
    """Concurrent callers asking for the same key share one upstream request."""

    def __init__(self) -> None:
        self._running: dict[Any, tuple[anyio.Event, list[Any]]] = {}

    async def run(self, key: Any, fetch: Callable[[], Awaitable[_T]]) -> _T:
        running = self._running.get(key)
        if running is not None:
            event, outcome = running
            await event.wait()
            if outcome and isinstance(outcome[0], BaseException):
                raise outcome[0]
            if outcome:
                return outcome[0]  # type: ignore[no-any-return]
            return await self.run(key, fetch)  # the first caller was cancelled: try ourselves
        event, outcome = anyio.Event(), []
        self._running[key] = (event, outcome)
        try:
            result = await fetch()
        except Exception as exc:
            outcome.append(exc)
            raise
        else:
            outcome.append(result)
            return result
        finally:
            del self._running[key]
            event.set()


@dataclass(frozen=True, slots=True)
class Collision:
    name: str
    winner: str
    loser: str


@dataclass
class _Freshness:
    """What a merged listing page is made of, for its ``ttlMs`` and ``cacheScope``."""

    private: bool
    now: float
    ttls_ms: list[float] = field(default_factory=list)

    def note(self, page: Page, announces: bool, default_ms: int) -> None:
        if announces:  # changes reach listening clients at once; the TTL serves those that do not listen
            self.ttls_ms.append(min(default_ms, page.ttl_ms) if page.ttl_ms else default_ms)
        elif page.ttl_ms is not None:
            self.ttls_ms.append(page.fresh_ms(self.now))
        else:
            self.ttls_ms.append(0)  # unannounced changes and no hint: always re-ask
        self.private = self.private or page.private


class CatalogState:
    """What the catalog's halves (listing, routing) read of it: its state, and the steps they share."""

    mounts: tuple[Mount, ...]
    ttl_ms: int
    _codec: CursorCodec
    _generation: str
    _page_size: int | None
    _on_upstream_error: Literal["skip", "fail"]
    _clock: Callable[[], float]
    _progress: ProgressRelay
    _client_requests: ClientRequestRelay
    _states: list[_MountState]

    async def _page(self, i: int, cursor: str | None) -> Page:
        raise NotImplementedError

    async def _lookup(self, i: int, local: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def _visible(self, i: int, local: str, public: str, tags: tuple[str, ...], viewer: Viewer | None) -> bool:
        raise NotImplementedError

    def _listed(self, i: int, local: str, public: str, tags: tuple[str, ...]) -> bool:
        raise NotImplementedError

    def shows_upstream(self, i: int, viewer: Viewer | None) -> bool:
        raise NotImplementedError

    async def _note_collision(self, i: int, local: str, public: str) -> bool:
        raise NotImplementedError
