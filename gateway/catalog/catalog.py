"""The merger: many upstream prompt lists presented as one.

Names become ``<namespace><sep><name>`` (or stay as they are on an unprefixed mount, or become what an
override names them); every other field passes through untouched unless an override reshapes it
(``overrides.py``). A listing fans out concurrently to every upstream not yet exhausted and
merges their pages in config order under one composite cursor (see ``cursor.py``). ``prompts/get``
and ``completion/complete`` are routed by *exact* name: a request is forwarded only for a name the
upstream itself listed and policy lets through, so no spelling trick reaches a hidden prompt.

Pages are cached per upstream and cursor when the upstream announces list changes (until
``invalidate()``, called on its list_changed, connect or disconnect: the announcement is what the
gateway trusts, whatever ``ttlMs`` says, as most servers send 0 there) or, when it does not, gives the
page a positive ``ttlMs`` (until that runs out). A merged page is as fresh as its least fresh part:
its ``ttlMs`` is the smallest of its upstream pages' freshness, and an upstream that neither announces
changes nor gives a TTL makes it 0.
No I/O happens here other than through ``PromptSource.request``, so it is tested with in-memory fakes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

import anyio
import structlog
from pydantic import BaseModel, ValidationError

from gateway.catalog import overrides
from gateway.catalog.cursor import START, CursorCodec, CursorTooLarge, ListingPosition, PagePosition
from gateway.catalog.policy import ALLOW_ALL, Rules, Viewer
from gateway.config import PromptOverride
from gateway.protocol.errors import (
    GatewayError,
    InvalidParams,
    UnknownPrompt,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamRejected,
    UpstreamUnavailable,
    UpstreamUnsupported,
)
from gateway.protocol.meta_keys import UNAVAILABLE_META_KEY
from gateway.protocol.models import (
    CompleteParams,
    CompleteResult,
    GetPromptParams,
    GetPromptResult,
    InputRequiredResult,
    ListParams,
    ListPromptsResult,
    PromptRef,
    describe,
    parse_params,
)
from gateway.rpc import Notify
from gateway.sources.client_requests import Ask, ClientRequestRelay
from gateway.sources.progress import ProgressRelay

MAX_UPSTREAM_CURSOR_CHARS = 2048
MAX_INDEX_PAGES = 2000
MAX_INDEX_PROMPTS = 100_000
MAX_EMPTY_ROUNDS = 32
MISS_REFRESH_INTERVAL_S = 1.0

log = structlog.get_logger("gateway.catalog")
_T = TypeVar("_T")


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


class Catalog:
    def __init__(
        self,
        mounts: Sequence[Mount],
        *,
        codec: CursorCodec,
        generation: str,
        policy: Rules = ALLOW_ALL,
        page_size: int | None = None,
        on_upstream_error: Literal["skip", "fail"] = "skip",
        progress: ProgressRelay | None = None,
        client_requests: ClientRequestRelay | None = None,
        ttl_ms: int = 60_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mounts = tuple(mounts)
        self._codec = codec
        self._generation = generation
        self._policy = policy
        self._page_size = page_size
        self._on_upstream_error = on_upstream_error
        self._progress = progress or ProgressRelay()
        self._client_requests = client_requests or ClientRequestRelay()
        self.ttl_ms = ttl_ms  # how long a listing stays fresh when every upstream announces its changes
        self._clock = clock
        self._states = [_MountState() for _ in self.mounts]
        # Names (and tags) each upstream listed last, kept across invalidation: who may learn it is down.
        self._known_names: list[dict[str, tuple[str, ...]]] = [{} for _ in self.mounts]
        self._by_namespace = {m.namespace: i for i, m in enumerate(self.mounts)}
        self._flights = _SingleFlight()
        # Collisions are possible only where an unprefixed mount or a rename shares the name space with
        # others: a mount may lose a name to an earlier one only at or after the first such mount.
        self._first_shared = next((i for i, m in enumerate(self.mounts) if not m.prefix or m.renames), len(self.mounts))

    def invalidate(self, namespace: str) -> None:
        index = self._by_namespace.get(namespace)
        if index is not None:
            self._states[index] = _MountState(epoch=self._states[index].epoch + 1)

    # ---- upstream pages and indexes ----------------------------------------------------------

    async def _page(self, i: int, cursor: str | None) -> Page:
        mount, state = self.mounts[i], self._states[i]
        cached = state.pages.get(cursor)
        if cached is not None and (
            mount.source.announces_list_changes or (cached.ttl_ms is not None and cached.fresh_ms(self._clock()) > 0)
        ):
            return cached
        epoch = state.epoch
        page = await self._flights.run((i, epoch, cursor), lambda: self._fetch_page(mount, cursor, self._clock()))
        known = {p["name"]: mount.tags(p) for p in page.prompts}
        if cursor is None and page.next_cursor is None:  # a one-page listing is all there is to know
            self._known_names[i] = known
        elif len(self._known_names[i]) < MAX_INDEX_PROMPTS:
            self._known_names[i] = {**self._known_names[i], **known}
        state = self._states[i]
        cacheable = mount.source.announces_list_changes or (page.ttl_ms or 0) > 0
        if cacheable and state.epoch == epoch:
            state.pages[cursor] = page
        return page

    @staticmethod
    async def _fetch_page(mount: Mount, cursor: str | None, now: float) -> Page:
        params = None if cursor is None else {"cursor": cursor}
        raw = await mount.source.request("prompts/list", params)
        result = _validate(mount, ListPromptsResult, raw, "prompts/list result")
        if result.nextCursor is not None and len(result.nextCursor) > MAX_UPSTREAM_CURSOR_CHARS:
            raise UpstreamProtocolError(mount.namespace, f"sent a cursor over {MAX_UPSTREAM_CURSOR_CHARS} characters")
        _check_result_type(mount, raw, "prompts/list")
        ttl_ms = None if result.ttlMs is None else max(0, int(result.ttlMs))
        return Page(tuple(raw["prompts"]), result.nextCursor, ttl_ms, result.cacheScope == "private", now)

    async def _index(self, i: int, *, refresh: bool = False) -> dict[str, dict[str, Any]]:
        """All of one upstream's prompts by their own names (first of a duplicated name wins)."""
        state = self._states[i]
        if state.index is not None and not refresh:
            return state.index
        epoch = state.epoch
        index = await self._flights.run(("index", i, epoch, refresh), lambda: self._build_index(i))
        state = self._states[i]
        if state.epoch == epoch:
            state.index, state.index_built_at = index, time.monotonic()
            self._known_names[i] = {local: self.mounts[i].tags(entry) for local, entry in index.items()}
        return index

    async def _build_index(self, i: int) -> dict[str, dict[str, Any]]:
        mount = self.mounts[i]
        index: dict[str, dict[str, Any]] = {}
        cursor: str | None = None
        seen_cursors: set[str] = set()
        for _ in range(MAX_INDEX_PAGES):
            page = await self._page(i, cursor)
            for prompt in page.prompts:
                index.setdefault(prompt["name"], prompt)
            if len(index) > MAX_INDEX_PROMPTS:
                raise UpstreamProtocolError(mount.namespace, f"lists more than {MAX_INDEX_PROMPTS} prompts")
            if page.next_cursor is None:
                return index
            if page.next_cursor in seen_cursors:
                raise UpstreamProtocolError(mount.namespace, "repeats a cursor: its listing never ends")
            seen_cursors.add(page.next_cursor)
            cursor = page.next_cursor
        raise UpstreamProtocolError(mount.namespace, f"lists more than {MAX_INDEX_PAGES} pages")

    async def _lookup(self, i: int, local: str) -> dict[str, Any] | None:
        """The prompt an upstream lists under ``local``; a miss re-lists an upstream that never announces
        changes (at most once a second, so unknown names cannot be used to hammer it)."""
        index = await self._index(i)
        if local in index:
            return index[local]
        mount, state = self.mounts[i], self._states[i]
        if (
            not mount.source.announces_list_changes
            and time.monotonic() - state.index_built_at >= MISS_REFRESH_INTERVAL_S
        ):
            return (await self._index(i, refresh=True)).get(local)
        return None

    # ---- visibility ----------------------------------------------------------------------------

    def upstream_of(self, public: str | None) -> str | None:
        """The namespace a public prompt name is served from, as far as its name says (for the audit)."""
        if public is None:
            return None
        for mount in self.mounts:
            if (mount.prefix or mount.renames) and mount.local_name(public) is not None:
                return mount.namespace
        return None

    def shows_any(self, namespaces: frozenset[str], viewer: Viewer | None) -> bool:
        """Whether ``viewer`` may see something of any of these upstreams (a list_changed is for it)."""
        return any(self.shows_upstream(i, viewer) for i, m in enumerate(self.mounts) if m.namespace in namespaces)

    def shows_upstream(self, i: int, viewer: Viewer | None) -> bool:
        """Whether the caller may learn of upstream ``i`` (that it is down, say): some prompt it last
        listed is visible to the caller or, before it ever listed, the rules could show some name of it."""
        mount = self.mounts[i]
        known = self._known_names[i]
        if known:
            return any(self._visible(i, local, mount.public_name(local), tags, viewer) for local, tags in known.items())
        return (
            mount.rules.may_allow_under("")
            and self._policy.may_allow_under(mount.prefix)
            and (viewer is None or viewer.may_allow_under(mount.prefix))
        )

    def _visible(self, i: int, local: str, public: str, tags: tuple[str, ...], viewer: Viewer | None) -> bool:
        """Whether upstream ``i``'s prompt ``local`` (with ``tags``) may be shown to ``viewer``: its own
        policy on its own name, the global and the viewer's on the public name, the name before a rename
        (deny rules only) and the tags."""
        mount = self.mounts[i]
        natural = mount.natural_name(local)
        return (
            mount.rules.allows(local, tags)
            and self._policy.allows(public, tags, original=natural)
            and (viewer is None or viewer.allows(public, tags, original=natural))
        )

    async def _owned_earlier(self, i: int, public: str) -> str | None:
        """The namespace of an earlier mount that shows the same public name (first in config wins)."""
        if i < self._first_shared:
            return None
        for j in range(i):
            mount = self.mounts[j]
            local = mount.local_name(public)
            if local is None or not mount.source.ready:
                continue
            try:
                entry = (await self._index(j)).get(local)
            except UpstreamError:
                continue
            if entry is not None and mount.rules.allows(local, mount.tags(entry)):
                return mount.namespace
        return None

    async def _note_collision(self, i: int, local: str, public: str) -> bool:
        mount = self.mounts[i]
        if mount.renames and mount.local_name(public) != local:
            winner: str | None = mount.namespace  # another prompt of the same upstream was renamed to it
        else:
            winner = await self._owned_earlier(i, public)
        if winner is None:
            return False
        state = self._states[i]
        if public not in state.logged_collisions:
            state.logged_collisions.add(public)
            log.warning("prompt_name_collision", name=public, shown_from=winner, hidden_from=self.mounts[i].namespace)
        return True

    # ---- prompts/list --------------------------------------------------------------------------

    async def list_prompts(self, params: dict[str, Any] | None, *, viewer: Viewer | None = None) -> dict[str, Any]:
        cursor = parse_params(ListParams, params).cursor
        generation = self._generation if viewer is None else f"{self._generation}/{viewer.key}"  # a view's own
        if cursor is None:
            position = ListingPosition(generation, tuple(START for _ in self.mounts))
        else:
            position = self._codec.decode(cursor, generation=generation, upstream_count=len(self.mounts))
        prompts: list[dict[str, Any]] = []
        unavailable: list[str] = []
        freshness = _Freshness(private=viewer is not None, now=self._clock())
        for _ in range(MAX_EMPTY_ROUNDS):
            position = await self._list_round(position, prompts, unavailable, viewer, freshness)
            if prompts or position.finished:
                break
        result: dict[str, Any] = {
            "prompts": prompts,
            "ttlMs": int(min(freshness.ttls_ms, default=self.ttl_ms)),
            "cacheScope": "private" if freshness.private else "public",
        }
        if not position.finished:
            try:
                result["nextCursor"] = self._codec.encode(position)
            except CursorTooLarge as exc:
                raise GatewayError("Internal error: the upstreams' cursors do not fit in one cursor") from exc
        if unavailable:
            result["_meta"] = {UNAVAILABLE_META_KEY: unavailable}
        return result

    async def _list_round(
        self,
        position: ListingPosition,
        out: list[dict[str, Any]],
        unavailable: list[str],
        viewer: Viewer | None,
        freshness: _Freshness,
    ) -> ListingPosition:
        pages: dict[int, Page | UpstreamError] = {}

        async def fetch(i: int, at: PagePosition) -> None:
            try:
                if not self.mounts[i].source.ready:
                    raise UpstreamUnavailable(self.mounts[i].namespace, "is not connected")
                pages[i] = await self._page(i, at.cursor)
            except UpstreamError as exc:
                pages[i] = exc

        async with anyio.create_task_group() as tg:
            for i, at in enumerate(position.upstreams):
                if at is not None:
                    tg.start_soon(fetch, i, at)

        room = self._page_size - len(out) if self._page_size is not None else math.inf
        upstreams = list(position.upstreams)
        for i, at in enumerate(position.upstreams):
            if at is None:
                continue
            page = pages[i]
            if isinstance(page, UpstreamError):
                if self._on_upstream_error == "fail":
                    raise page
                log.warning("upstream_left_out_of_listing", upstream=self.mounts[i].namespace, error=page.message)
                if self.shows_upstream(i, viewer):  # never name an upstream the caller cannot see at all
                    unavailable.append(self.mounts[i].namespace)
                freshness.ttls_ms.append(0)  # ask again soon: it may be back
                upstreams[i] = None  # a later page must not wait for it: it announces its return
                continue
            freshness.note(page, self.mounts[i].source.announces_list_changes, self.ttl_ms)
            consumed = at.offset
            while consumed < len(page.prompts) and room > 0:
                prompt = page.prompts[consumed]
                consumed += 1
                local = prompt["name"]
                mount = self.mounts[i]
                public, tags = mount.public_name(local), mount.tags(prompt)
                if not self._visible(i, local, public, tags, viewer) or await self._note_collision(i, local, public):
                    continue
                out.append(mount.shown(prompt, public, tags))
                room -= 1
            if consumed < len(page.prompts):
                upstreams[i] = PagePosition(at.cursor, consumed)
            elif page.next_cursor is None:
                upstreams[i] = None
            else:
                upstreams[i] = PagePosition(page.next_cursor, 0)
        return ListingPosition(position.generation, tuple(upstreams))

    async def all_prompts(self, *, viewer: Viewer | None = None) -> dict[str, Any]:
        """Every page of the unified listing, concatenated (the CLI's ``list``)."""
        prompts: list[dict[str, Any]] = []
        unavailable: list[str] = []
        params: dict[str, Any] | None = None
        while True:
            page = await self.list_prompts(params, viewer=viewer)
            prompts.extend(page["prompts"])
            unavailable.extend(page.get("_meta", {}).get(UNAVAILABLE_META_KEY, []))
            if "nextCursor" not in page:
                return {"prompts": prompts, "unavailable": sorted(set(unavailable))}
            params = {"cursor": page["nextCursor"]}

    # ---- routing -------------------------------------------------------------------------------

    async def _resolve(self, public: str, viewer: Viewer | None) -> tuple[Mount, str, dict[str, Any]]:
        """The mount, local name and listing entry behind a public name, or UnknownPrompt. A hidden name
        and an unknown one answer alike, also under an upstream that is down: both say it is down when
        the caller may see that upstream at all, both are unknown otherwise (so no answer tells a deny
        rule apart from a name that does not exist)."""
        for i, mount in enumerate(self.mounts):
            local = mount.local_name(public)
            if local is None:
                continue
            if not mount.source.ready:
                if mount.claims(public):
                    if self.shows_upstream(i, viewer):
                        raise UpstreamUnavailable(mount.namespace, "is not connected")
                    raise UnknownPrompt(public)
                continue
            try:
                entry = await self._lookup(i, local)
            except UpstreamError:
                if mount.claims(public):
                    raise
                continue
            if entry is None:
                continue
            tags = mount.tags(entry)
            if not mount.rules.allows(local, tags):
                continue  # as if the upstream did not list it: a later one may show the name
            if not self._visible(i, local, public, tags, viewer):
                raise UnknownPrompt(public)
            return mount, local, entry
        raise UnknownPrompt(public)

    async def get_prompt(
        self,
        params: dict[str, Any] | None,
        *,
        viewer: Viewer | None = None,
        notify: Notify | None = None,
        input_required: bool = False,
        ask: Ask | None = None,
    ) -> dict[str, Any]:
        """``input_required``: whether the client can answer a multi round-trip request (2026-07-28);
        an upstream's InputRequiredResult then passes through untouched, else it is a clear error."""
        request = parse_params(GetPromptParams, params)
        mount, local, entry = await self._resolve(request.name, viewer)
        override = mount.overrides.get(local)
        arguments = overrides.forwarded_arguments(request.name, override, request.arguments or {})
        _check_required_arguments(request.name, entry, arguments)
        outgoing = {**(params or {}), "name": local}
        if override is not None and (arguments or "arguments" in outgoing):
            outgoing["arguments"] = arguments
        with (
            self._progress.route(outgoing, notify, upstream=mount.namespace) as forwarded,
            self._client_requests.route(mount.namespace, ask),
        ):
            raw = await mount.source.request("prompts/get", forwarded)
        if _check_result_type(mount, raw, "prompts/get", input_required=True) == "input_required":
            if not input_required:
                raise UpstreamUnsupported(
                    mount.namespace,
                    "needs more input from the client to render this prompt (a multi round-trip request), "
                    "which only 2026-07-28 clients can answer",
                )
            _validate(mount, InputRequiredResult, raw, "input_required result")
            return raw
        _validate(mount, GetPromptResult, raw, "prompts/get result")
        return overrides.rendered(raw, override)

    async def complete(
        self,
        params: dict[str, Any] | None,
        *,
        viewer: Viewer | None = None,
        notify: Notify | None = None,
        ask: Ask | None = None,
    ) -> dict[str, Any]:
        request = parse_params(CompleteParams, params)
        if not isinstance(request.ref, PromptRef):
            raise InvalidParams("Invalid params: this gateway serves prompts; it completes ref/prompt only")
        mount, local, _ = await self._resolve(request.ref.name, viewer)
        shaped = overrides.forwarded_completion(request.ref.name, mount.overrides.get(local), params or {})
        empty = {"completion": {"values": [], "total": 0, "hasMore": False}}
        if not mount.source.completes:
            return empty
        try:
            with (
                self._progress.route(
                    {**shaped, "ref": {**shaped["ref"], "name": local}},
                    notify,
                    upstream=mount.namespace,
                ) as fwd,
                self._client_requests.route(mount.namespace, ask),
            ):
                raw = await mount.source.request("completion/complete", fwd)
        except UpstreamRejected as exc:
            if exc.code == -32601:  # a 2024-11-05 server without completion support
                return empty
            raise
        _check_result_type(mount, raw, "completion/complete")
        _validate(mount, CompleteResult, raw, "completion result")
        return raw

    # ---- reports ---------------------------------------------------------------------------------

    async def prompt_counts(self) -> dict[str, int | UpstreamError]:
        """Per upstream, how many prompts it lists (before policy), or why it could not be listed."""
        counts: dict[str, int | UpstreamError] = {}

        async def count(i: int) -> None:
            mount = self.mounts[i]
            try:
                if not mount.source.ready:
                    raise UpstreamUnavailable(mount.namespace, "is not connected")
                counts[mount.namespace] = len(await self._index(i))
            except UpstreamError as exc:
                counts[mount.namespace] = exc

        async with anyio.create_task_group() as tg:
            for i in range(len(self.mounts)):
                tg.start_soon(count, i)
        return {m.namespace: counts[m.namespace] for m in self.mounts}

    async def collisions(self) -> list[Collision]:
        found: list[Collision] = []
        for i, mount in enumerate(self.mounts):
            if not mount.source.ready:
                continue
            try:
                index = await self._index(i)
            except UpstreamError:
                continue
            for local, entry in index.items():
                public = mount.public_name(local)
                if mount.rules.allows(local, mount.tags(entry)):
                    if mount.renames and mount.local_name(public) != local:
                        found.append(Collision(public, mount.namespace, mount.namespace))
                        continue
                    winner = await self._owned_earlier(i, public)
                    if winner is not None:
                        found.append(Collision(public, winner, mount.namespace))
        return found


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


_Result = TypeVar("_Result", bound=BaseModel)


def _validate(mount: Mount, model: type[_Result], raw: dict[str, Any], what: str) -> _Result:
    """The upstream's result checked against ``model``; an invalid one costs only this upstream's request."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise UpstreamProtocolError(mount.namespace, f"sent an invalid {what}: {describe(exc)}") from exc


def _check_result_type(mount: Mount, raw: dict[str, Any], method: str, *, input_required: bool = False) -> str:
    """A result's ``resultType`` (absent means complete: revisions before 2026-07-28 have none)."""
    kind = raw.get("resultType", "complete")
    if kind == "complete" or (kind == "input_required" and input_required):
        return kind  # type: ignore[no-any-return]
    raise UpstreamProtocolError(mount.namespace, f"answered {method} with an unknown resultType {kind!r}")


def _check_required_arguments(name: str, entry: dict[str, Any], arguments: dict[str, str]) -> None:
    declared = entry.get("arguments") or ()
    missing = [
        arg["name"]
        for arg in declared
        if isinstance(arg, dict) and arg.get("required") is True and arg.get("name") not in arguments
    ]
    if missing:
        raise InvalidParams(
            f"Missing required argument{'s' if len(missing) > 1 else ''} for prompt {name}: " + ", ".join(missing)
        )
