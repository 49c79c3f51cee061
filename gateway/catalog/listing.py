"""``prompts/list`` over every upstream: a page fans out concurrently to each upstream not yet exhausted,
merges their pages in config order under one composite cursor, and is as fresh as its least fresh part.
Mixed into the catalog.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import anyio
import structlog
from pydantic import BaseModel

from gateway.catalog.cursor import START, CursorTooLarge, ListingPosition, PagePosition
from gateway.catalog.mounts import (
    MAX_EMPTY_ROUNDS,
    CatalogState,
    Page,
    _Freshness,
)
from gateway.catalog.policy import Viewer
from gateway.observability.tracing import tracing
from gateway.protocol.errors import (
    GatewayError,
    UpstreamError,
)
from gateway.protocol.meta_keys import UNAVAILABLE_META_KEY
from gateway.protocol.models import (
    ListParams,
    parse_params,
)

_T = TypeVar("_T")
_Result = TypeVar("_Result", bound=BaseModel)

log = structlog.get_logger("gateway.catalog")


class Listing(CatalogState):
    """The listing half of the catalog; the state it reads is the catalog's."""

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
                    raise self.mounts[i].source.unavailable()
                pages[i] = await self._page(i, at.cursor)
            except UpstreamError as exc:
                pages[i] = exc

        asked = sum(at is not None for at in position.upstreams)
        with tracing().step("prompts/list fan-out", **{"prompt_gateway.upstreams": asked}):
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
