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

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from typing import Any, Literal, TypeVar

import anyio
import structlog
from pydantic import BaseModel

from gateway.catalog import overrides
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.explain import Explained, Explanation, Layer, explain
from gateway.catalog.listing import Listing
from gateway.catalog.mounts import (
    MAX_INDEX_PAGES,
    MAX_INDEX_PROMPTS,
    MAX_UPSTREAM_CURSOR_CHARS,
    MISS_REFRESH_INTERVAL_S,
    Collision,
    Mount,
    Page,
    _MountState,
    _SingleFlight,
)
from gateway.catalog.policy import ALLOW_ALL, Rules, Viewer
from gateway.catalog.routing import MAX_DECIDED, Routing, _check_result_type, _validate
from gateway.catalog.skills import SkillCatalog
from gateway.protocol.control_chars import escaped, has_control_chars
from gateway.protocol.errors import (
    UpstreamError,
    UpstreamProtocolError,
)
from gateway.protocol.models import (
    ListPromptsResult,
)
from gateway.sources.client_requests import ClientRequestRelay
from gateway.sources.progress import ProgressRelay

log = structlog.get_logger("gateway.catalog")
_T = TypeVar("_T")


class Catalog(Listing, Routing):
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
        self._decided = {}
        self._upstream_by_name: dict[str, str | None] = {}  # upstream_of's answers (its inputs never change)
        # Collisions are possible only where an unprefixed mount or a rename shares the name space with
        # others: a mount may lose a name to an earlier one only at or after the first such mount.
        self._first_shared = next((i for i, m in enumerate(self.mounts) if not m.prefix or m.renames), len(self.mounts))
        self.skills = SkillCatalog(
            self.mounts, codec=codec, generation=generation, page_size=page_size, ttl_ms=ttl_ms, policy=policy
        )

    def invalidate(self, namespace: str) -> None:
        index = self._by_namespace.get(namespace)
        if index is not None:
            self._states[index] = _MountState(epoch=self._states[index].epoch + 1)
        self.skills.invalidate(namespace)  # a relayed upstream's skill manifests, cached till its change

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
        self._note_refusals(i, known)
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
        if not getattr(mount.source, "offers_prompts", True):  # relayed for its skills alone (docs/skills.md)
            return Page((), None, None, False, now)
        params = None if cursor is None else {"cursor": cursor}
        raw = await mount.source.request("prompts/list", params)
        result = _validate(mount, ListPromptsResult.model_validate, raw, "prompts/list result")
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
        if public in self._upstream_by_name:
            return self._upstream_by_name[public]
        found = next(
            (m.namespace for m in self.mounts if (m.prefix or m.renames) and m.local_name(public) is not None), None
        )
        if len(self._upstream_by_name) >= MAX_DECIDED:  # (names are the clients': kept within a bound)
            self._upstream_by_name.clear()
        self._upstream_by_name[public] = found
        return found

    def shows_any(self, namespaces: frozenset[str], viewer: Viewer | None) -> bool:
        """Whether ``viewer`` may see something of any of these upstreams, now or after their change (a
        list_changed is for it): what they last listed is judged, and so are the rules, which may allow a
        name the change brought (a prompt added, a skill) where nothing listed before was visible."""
        return any(
            self.shows_upstream(i, viewer) or self._rules_may_show(i, viewer)
            for i, m in enumerate(self.mounts)
            if m.namespace in namespaces
        )

    def shows_upstream(self, i: int, viewer: Viewer | None) -> bool:
        """Whether the caller may learn of upstream ``i`` (that it is down, say): some prompt it last
        listed is visible to the caller or, before it ever listed, the rules could show some name of it."""
        mount = self.mounts[i]
        known = self._known_names[i]
        if known:
            return any(self._visible(i, local, mount.public_name(local), tags, viewer) for local, tags in known.items())
        return self._rules_may_show(i, viewer)

    def _rules_may_show(self, i: int, viewer: Viewer | None) -> bool:
        """Whether the rules could show some name of upstream ``i`` (its own, the global, the viewer's)."""
        mount = self.mounts[i]
        return (
            mount.rules.may_allow_under("")
            and self._policy.may_allow_under(mount.prefix)
            and (viewer is None or viewer.may_allow_under(mount.prefix))
        )

    def _visible(self, i: int, local: str, public: str, tags: tuple[str, ...], viewer: Viewer | None) -> bool:
        """Whether upstream ``i``'s prompt ``local`` (with ``tags``) may be shown to ``viewer``: its own
        policy on its own name, the global and the viewer's on the public name, the name before a rename
        (deny rules only) and the tags."""
        natural = self.mounts[i].natural_name(local)
        return self._listed(i, local, public, tags) and (
            viewer is None or viewer.allows(public, tags, original=natural)
        )

    def _listed(self, i: int, local: str, public: str, tags: tuple[str, ...]) -> bool:
        """Whether upstream ``i``'s prompt is in the gateway's catalog at all: its upstream's policy and
        the global one allow it, and its public name holds no control character (docs/catalog.md). One
        they hide is as if its upstream did not list it (a later upstream may show the name); one hidden
        only by a token's or a view's policy still holds its name."""
        mount = self.mounts[i]
        return (
            mount.rules.allows(local, tags)
            and self._policy.allows(public, tags, original=mount.natural_name(local))
            and not has_control_chars(public)
        )

    def _note_refusals(self, i: int, names: Iterable[str]) -> None:
        """Log, once per listing, each prompt hidden for a public name that would steer a display."""
        mount, state = self.mounts[i], self._states[i]
        for local in names:
            public = mount.public_name(local)
            if has_control_chars(public) and public not in state.logged_refusals:
                state.logged_refusals.add(public)
                log.warning("prompt_name_refused", upstream=mount.namespace, name=escaped(public))

    def refused_names(self) -> list[tuple[str, str]]:
        """Each upstream's prompts (namespace, public name) hidden from everyone for the control
        characters in their names, as far as the catalog knows (``check`` names them)."""
        return [
            (mount.namespace, public)
            for i, mount in enumerate(self.mounts)
            for public in map(mount.public_name, self._known_names[i])
            if has_control_chars(public)
        ]

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
            if entry is not None and self._listed(j, local, public, mount.tags(entry)):
                return mount.namespace
        return None

    async def _collision_winner(self, i: int, local: str, public: str) -> str | None:
        """The upstream that shows ``public`` in place of upstream ``i``'s ``local``, if another does."""
        mount = self.mounts[i]
        if mount.renames and mount.local_name(public) != local:
            return mount.namespace  # another prompt of the same upstream was renamed to it
        return await self._owned_earlier(i, public)

    async def _note_collision(self, i: int, local: str, public: str) -> bool:
        winner = await self._collision_winner(i, local, public)
        if winner is None:
            return False
        state = self._states[i]
        if public not in state.logged_collisions:
            state.logged_collisions.add(public)
            log.warning("prompt_name_collision", name=public, shown_from=winner, hidden_from=self.mounts[i].namespace)
        return True

    # ---- prompts/list --------------------------------------------------------------------------

    # ---- routing -------------------------------------------------------------------------------

    # ---- reports ---------------------------------------------------------------------------------

    def listed_counts(self) -> dict[str, int]:
        """How many prompts each upstream last listed (before policy), as far as the catalog knows."""
        return {mount.namespace: len(self._known_names[i]) for i, mount in enumerate(self.mounts)}

    async def explain_all(self, layers: Sequence[Layer], name: str | None, *, refresh: bool = False) -> Explained:
        """What ``prompt-gateway explain`` and the operator page's form answer: the prompts and the skills
        ``name`` names (every one when None), and the upstreams of either that could not be read."""
        prompts, unavailable = await self.explanations(layers, name, refresh=refresh)
        skills, skills_unavailable = await self.skills.explanations(layers, name)
        unavailable += [namespace for namespace in skills_unavailable if namespace not in unavailable]
        everything: list[Explanation] = []
        if name is not None and not prompts and not skills:
            everything = (await self.explanations(layers))[0] + (await self.skills.explanations(layers))[0]
        return Explained(prompts, skills, unavailable, everything)

    async def explanations(
        self, layers: Sequence[Layer], name: str | None = None, *, refresh: bool = False
    ) -> tuple[list[Explanation], list[str]]:
        """Every prompt the upstreams list (or those whose public name is ``name``) explained for a caller
        whose requests go through the global policy and then ``layers``; and the upstreams that could
        not be read. What ``_visible`` and the collision check decide when serving, with the reasons."""
        found: list[Explanation] = []
        unavailable: list[str] = []
        everyone = [Layer("the global [policy]", self._policy), *layers]
        for i, mount in enumerate(self.mounts):
            try:
                index = await self._index(i, refresh=refresh) if mount.source.ready else None
            except UpstreamError:
                index = None
            if index is None:
                unavailable.append(mount.namespace)
                continue
            for local, entry in index.items():
                public = mount.public_name(local)
                if name is not None and public != name:
                    continue
                tags = mount.tags(entry)
                explained = explain(mount, local, tags, everyone)
                if explained.visible:
                    winner = await self._collision_winner(i, local, public)
                    if winner is not None:
                        explained = dataclasses.replace(explained, shown_instead=winner)
                found.append(explained)
        return found, unavailable

    async def prompt_counts(self) -> dict[str, int | UpstreamError]:
        """Per upstream, how many prompts it lists (before policy), or why it could not be listed."""
        counts: dict[str, int | UpstreamError] = {}

        async def count(i: int) -> None:
            mount = self.mounts[i]
            try:
                if not mount.source.ready:
                    raise mount.source.unavailable()
                counts[mount.namespace] = len(await self._index(i))
            except UpstreamError as exc:
                counts[mount.namespace] = exc

        async with anyio.create_task_group() as tg:
            for i in range(len(self.mounts)):
                tg.start_soon(count, i)
        return {m.namespace: counts[m.namespace] for m in self.mounts}

    async def override_notes(self) -> list[tuple[str, str]]:
        """Each upstream's overrides that name nothing it lists (``overrides.unmatched``), by upstream;
        an upstream that cannot be listed now says nothing."""
        notes = []
        for i, mount in enumerate(self.mounts):
            if mount.overrides and mount.source.ready:
                with suppress(UpstreamError):
                    notes += [
                        (mount.namespace, note) for note in overrides.unmatched(await self._index(i), mount.overrides)
                    ]
        return notes

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
                if self._listed(i, local, public, mount.tags(entry)):
                    if mount.renames and mount.local_name(public) != local:
                        found.append(Collision(public, mount.namespace, mount.namespace))
                        continue
                    winner = await self._owned_earlier(i, public)
                    if winner is not None:
                        found.append(Collision(public, winner, mount.namespace))
        return found


_Result = TypeVar("_Result", bound=BaseModel)
