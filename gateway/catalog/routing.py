"""``prompts/get`` and ``completion/complete`` routed by *exact* name: forwarded only for a name the upstream
itself listed and policy lets through, its answer validated before it is relayed. Mixed into the catalog.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from gateway.catalog import overrides
from gateway.catalog.accepted import Accepted, accepted
from gateway.catalog.accepted import check as check_arguments
from gateway.catalog.mounts import (
    CatalogState,
    Mount,
)
from gateway.catalog.policy import Viewer
from gateway.protocol.errors import (
    InvalidParams,
    UnknownPrompt,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamRejected,
    UpstreamUnsupported,
)
from gateway.protocol.models import (
    CompleteParams,
    CompleteResult,
    InputRequiredResult,
    PromptGet,
    PromptRef,
    check_prompt_result,
    describe,
    parse_params,
    prompt_get,
)
from gateway.rpc import Notify
from gateway.sources.client_requests import Ask

_T = TypeVar("_T")
_Checked = TypeVar("_Checked")


MAX_DECIDED = 4096
"""Routing decisions kept (public name and caller); past it they are made afresh and kept anew."""


class Routing(CatalogState):
    """The routing half of the catalog; the state it reads is the catalog's."""

    _decided: dict[tuple[str, int], tuple[Viewer | None, int, str, dict[str, Any], dict[str, dict[str, Any]]]]
    """What ``_resolve`` decided for (public name, caller), with the upstream's index it read: kept
    while that index is the upstream's (a list change or reconnection replaces it) and the upstream is
    ready. Only a name no earlier upstream could claim is kept (an earlier one's miss may re-list it)."""

    async def _resolve(self, public: str, viewer: Viewer | None) -> tuple[int, str, dict[str, Any]]:
        """``_decide``'s answer, decided once per name, caller and listing: every input it reads
        (the names' mount, its index and readiness, the policies, the caller's rules) is the same."""
        key = (public, id(viewer))  # the caller's rules by identity (kept alive here, so never reused)
        kept = self._decided.get(key)
        if kept is not None:
            kept_viewer, i, local, entry, index = kept
            if kept_viewer is viewer and self._states[i].index is index and self.mounts[i].source.ready:
                return i, local, entry
        i, local, entry = await self._decide(public, viewer)
        read = self._states[i].index
        first = next(j for j, mount in enumerate(self.mounts) if mount.local_name(public) is not None)
        if read is not None and read.get(local) is entry and first == i:
            if len(self._decided) >= MAX_DECIDED:
                self._decided.clear()
            self._decided[key] = (viewer, i, local, entry, read)
        return i, local, entry

    async def _decide(self, public: str, viewer: Viewer | None) -> tuple[int, str, dict[str, Any]]:
        """The mount's index, local name and listing entry behind a public name, or UnknownPrompt. A hidden name
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
                        raise mount.source.unavailable()
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
            if not self._listed(i, local, public, tags):
                continue  # as if the upstream did not list it: a later one may show the name
            if not self._visible(i, local, public, tags, viewer):
                raise UnknownPrompt(public)
            return i, local, entry
        raise UnknownPrompt(public)

    def _accepted(self, i: int, local: str, entry: dict[str, Any]) -> Accepted:
        """What the prompt takes, worked out once per listing entry (a new listing brings new entries)."""
        state = self._states[i]
        kept = state.accepts.get(local)
        if kept is not None and kept[0] is entry:
            return kept[1]
        mount = self.mounts[i]
        found = accepted(entry, mount.overrides.get(local), own_source=mount.own_tags)
        state.accepts[local] = (entry, found)
        return found

    async def get_prompt(
        self,
        params: dict[str, Any] | None,
        *,
        viewer: Viewer | None = None,
        notify: Notify | None = None,
        input_required: bool = False,
        ask: Ask | None = None,
        parsed: PromptGet | None = None,
    ) -> dict[str, Any]:
        """``input_required``: whether the client can answer a multi round-trip request (2026-07-28);
        an upstream's InputRequiredResult then passes through untouched, else it is a clear error.
        ``parsed``: the params validated already (by the audit, which reads them first)."""
        request = parsed or prompt_get(params)
        i, local, entry = await self._resolve(request.name, viewer)
        mount = self.mounts[i]
        override = mount.overrides.get(local)
        given = request.arguments or {}
        arguments = overrides.forwarded_arguments(request.name, override, given)
        check_arguments(request.name, self._accepted(i, local, entry), given, arguments)
        outgoing = {**(params or {}), "name": local}
        if override is not None and (arguments or "arguments" in outgoing):
            outgoing["arguments"] = arguments
        with (
            self._progress.route(outgoing, notify, upstream=mount.namespace) as forwarded,
            self._client_requests.route(mount.source, ask),
        ):
            raw = await mount.source.request("prompts/get", forwarded)
        if _check_result_type(mount, raw, "prompts/get", input_required=True) == "input_required":
            if not input_required:
                raise UpstreamUnsupported(
                    mount.namespace,
                    "needs more input from the client to render this prompt (a multi round-trip request), "
                    "which only 2026-07-28 clients can answer",
                )
            _validate(mount, InputRequiredResult.model_validate, raw, "input_required result")
            return raw
        _validate(mount, check_prompt_result, raw, "prompts/get result")
        return overrides.rendered(raw, override)

    async def complete(
        self,
        params: dict[str, Any] | None,
        *,
        viewer: Viewer | None = None,
        notify: Notify | None = None,
        ask: Ask | None = None,
        parsed: CompleteParams | None = None,
    ) -> dict[str, Any]:
        request = parsed or parse_params(CompleteParams, params)
        if not isinstance(request.ref, PromptRef):
            raise InvalidParams("Invalid params: this gateway serves prompts; it completes ref/prompt only")
        i, local, _ = await self._resolve(request.ref.name, viewer)
        mount = self.mounts[i]
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
                self._client_requests.route(mount.source, ask),
            ):
                raw = await mount.source.request("completion/complete", fwd)
        except UpstreamRejected as exc:
            if exc.code == -32601:  # a 2024-11-05 server without completion support
                return empty
            raise
        _check_result_type(mount, raw, "completion/complete")
        _validate(mount, CompleteResult.model_validate, raw, "completion result")
        return raw


def _validate(mount: Mount, check: Callable[[dict[str, Any]], _Checked], raw: dict[str, Any], what: str) -> _Checked:
    """The upstream's result checked (``check``: a model's ``model_validate``, an adapter's
    ``validate_python``); an invalid one costs only this upstream's request."""
    try:
        return check(raw)
    except ValidationError as exc:
        raise UpstreamProtocolError(mount.namespace, f"sent an invalid {what}: {describe(exc)}") from exc


def _check_result_type(mount: Mount, raw: dict[str, Any], method: str, *, input_required: bool = False) -> str:
    """A result's ``resultType`` (absent means complete: revisions before 2026-07-28 have none)."""
    kind = raw.get("resultType", "complete")
    if kind == "complete" or (kind == "input_required" and input_required):
        return kind  # type: ignore[no-any-return]
    raise UpstreamProtocolError(mount.namespace, f"answered {method} with an unknown resultType {kind!r}")
