"""The MCP server side, for clients of every revision.

``PromptService`` is what the gateway serves, whatever the era: discovery, listing, getting,
completing and (modern) listening for list changes. Around it:

* ``ClientSession``: one connected client on a stream (stdio) or one legacy HTTP session. A request
  carrying the 2026-07-28 envelope is served statelessly, as that revision asks; everything else goes
  through the handshake-era state machine in ``_ALLOWED``:

      new ──initialize──► initializing ──notifications/initialized──► ready ──► closed

  Requests other than ping before ``initialize`` are refused; requests after the initialize answer
  but before ``initialized`` are served (clients race it, and nothing here depends on it).
* The HTTP front end calls ``PromptService.modern`` directly for stateless requests.
* ``Hub``: every initialized session and every ``subscriptions/listen`` stream, so one upstream change
  reaches each of them once.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal

import anyio

from gateway import __version__
from gateway.catalog import prompt_tools
from gateway.catalog.catalog import Catalog
from gateway.catalog.policy import Viewer
from gateway.frontend.hub import Hub, Subscription
from gateway.frontend.skills import SKILL_METHODS, parse_skill_read, serve_skills, skill_capabilities
from gateway.identity.audit import AUDITED, SKILL_READS, AuditTrail, prompt_of, skill_of
from gateway.identity.principal import Identity, seconds_left
from gateway.identity.rate_limits import RateLimits
from gateway.observability.metrics import Metrics
from gateway.observability.tracing import tracing
from gateway.protocol.eras import for_client
from gateway.protocol.errors import GatewayError, InvalidCursor, InvalidParams, MethodNotFound, RateLimited, shown
from gateway.protocol.jsonrpc import Request
from gateway.protocol.lists import PROMPTS, SKILLS
from gateway.protocol.models import CompleteParams, PromptGet, parse_params, prompt_get
from gateway.protocol.modern import (
    SUBSCRIPTION_ID_KEY,
    Envelope,
    check_version,
    read_envelope,
    stated_version,
    supported_versions,
)
from gateway.rpc import Notify
from gateway.sources.client_requests import Ask

SessionState = Literal["new", "initializing", "ready", "closed"]
SERVER_INFO = {"name": "mcp-prompt-gateway", "title": "MCP Prompt Gateway", "version": __version__}

_TOOLS = frozenset({"tools/list", "tools/call"})  # served only with [server] prompts_as_tools
_SKILLS = frozenset(SKILL_METHODS)  # served only where some upstream serves skills (docs/skills.md)
_SERVED = frozenset({"prompts/list", "prompts/get", "completion/complete"}) | _TOOLS | _SKILLS
_ALLOWED: dict[SessionState, frozenset[str]] = {
    "new": frozenset({"initialize", "ping"}),
    "initializing": _SERVED | {"ping"},
    "ready": _SERVED | {"ping"},
    "closed": frozenset(),
}
MODERN_METHODS = _SERVED | {"server/discover", "subscriptions/listen"}
_REMOVED_IN_MODERN = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe"})
KNOWN_METHODS = MODERN_METHODS | {"initialize", "ping"}


class PromptService:
    def __init__(
        self,
        catalog: Callable[[], Catalog],
        *,
        completions: Callable[[], bool],
        hub: Hub,
        metrics: Metrics | None = None,
        warm_up: Callable[[], Awaitable[None]] | None = None,
        audit: AuditTrail | None = None,
        prompts_as_tools: bool = False,
        limits: Callable[[], RateLimits | None] = lambda: None,
    ) -> None:
        self._catalog = catalog
        self._limits = limits
        self._audit = audit
        self.prompts_as_tools = prompts_as_tools
        self._warm_up = warm_up
        self.offers_completions = completions
        self._hub = hub
        self._metrics = metrics

    def capabilities(self, *, completions: bool) -> dict[str, Any]:
        capabilities: dict[str, Any] = {"prompts": {"listChanged": True}}
        if completions:
            capabilities["completions"] = {}
        if self.prompts_as_tools:
            capabilities["tools"] = {"listChanged": True}
        if self._catalog().skills.offered:
            capabilities.update(skill_capabilities())
        return capabilities

    @property
    def offers_skills(self) -> bool:
        """Whether skills are served: a change is then announced as ``resources/list_changed`` too."""
        return self._catalog().skills.offered

    async def modern(
        self,
        request: Request,
        notify: Notify,
        *,
        viewer: Viewer | None,
        who: Identity | None = None,
        envelope: Envelope | None = None,
    ) -> dict[str, Any]:
        """A stateless (2026-07-28) request: its envelope says everything, no session is consulted.
        ``envelope``: the request's, when the front end has read it already (it is read once)."""
        traced = tracing()
        version = stated_version(request.params) if traced.enabled else None  # (only a span records it)
        with traced.server(request, mcp_version=version, session_id=None):
            await self.admit(who, request.method, request.params)
            return await self._modern(request, notify, viewer=viewer, who=who, envelope=envelope)

    async def admit(self, who: Identity | None, method: str, params: dict[str, Any] | None) -> None:
        """Count a client's request against its limits; RateLimited (audited, counted) if over one. A tool
        call (``prompts_as_tools``) counts against the limit of the prompt method it is served as too, in
        the same pass (before the global bound: refused by its own limit, it uses up nothing shared)."""
        limits = self._limits()
        if limits is None or not limits.active:
            return
        served = prompt_tools.stands_for(params) if method == "tools/call" else None
        try:
            await limits.admit(who, method, also=served[0] if served is not None else None)
        except RateLimited as exc:
            if self._audit is not None:  # a tool call refused for its prompt method: audited as that one
                audited = served if served is not None and exc.limit == served[0] else (method, params)
                self._audit.limited(who, *audited, exc)
            if self._metrics is not None:
                self._metrics.rate_limited(exc.limit)
            raise

    async def _modern(
        self,
        request: Request,
        notify: Notify,
        *,
        viewer: Viewer | None,
        who: Identity | None,
        envelope: Envelope | None,
    ) -> dict[str, Any]:
        envelope = envelope or read_envelope(request.params)
        check_version(envelope)
        method = request.method
        if (
            method not in MODERN_METHODS
            or (method in _TOOLS and not self.prompts_as_tools)
            or (method in _SKILLS and not self._catalog().skills.offered)
        ):
            removed = " (removed in 2026-07-28)" if method in _REMOVED_IN_MODERN else ""
            raise MethodNotFound(f"Method not found: {shown(method)}{removed}")
        if method == "subscriptions/listen":
            result = await self._listen(request, notify, viewer, who)
        else:
            result = await self.serve(
                method,
                request.params,
                viewer=viewer,
                notify=notify,
                completions=method in ("server/discover", "completion/complete") and self.offers_completions(),
                modern=True,
                who=who,
            )
        return for_client(method, result, envelope.version, SERVER_INFO)

    async def serve(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        viewer: Viewer | None,
        notify: Notify,
        completions: bool,
        modern: bool,
        ask: Ask | None = None,
        who: Identity | None = None,
        skills_declared: bool = False,
    ) -> dict[str, Any]:
        """The result of a method both eras share, in the newest shape (``for_client`` adapts it). What
        reads the catalog first waits for upstreams still starting (bounded); discovery, like
        ``initialize``, answers at once. ``skills_declared``: the session was told of skills at its start."""
        if method != "server/discover" and self._warm_up is not None:
            await self._warm_up()  # until upstreams in their first attempt have settled (short, bounded, at start)
        catalog = self._catalog()
        audited: AbstractContextManager[None] = nullcontext()
        parsed: PromptGet | CompleteParams | None = None
        if self._audit is not None and method in SKILL_READS:
            audited = self._audited_skill_read(catalog, method, params, who, declared=skills_declared)
        elif self._audit is not None and method in AUDITED:
            try:  # the audit reads the params before the catalog would: they are valid first (and once)
                parsed = prompt_get(params) if method == "prompts/get" else parse_params(CompleteParams, params)
            except InvalidParams as exc:
                self._audit.invalid(who, method, params, exc.message)
                raise
            audited = self._audit.request(who, method, params, catalog.upstream_of(prompt_of(method, params)))
        with audited:
            if method == "server/discover":
                return {
                    "supportedVersions": supported_versions(),
                    "capabilities": self.capabilities(completions=completions),
                    "ttlMs": catalog.ttl_ms,
                    "cacheScope": "public",
                }
            if method == "prompts/list":
                return await catalog.list_prompts(params, viewer=viewer)
            if method in _SKILLS:
                return await serve_skills(catalog.skills, method, params, viewer=viewer, declared=skills_declared)
            if method == "prompts/get":
                return await catalog.get_prompt(
                    params,
                    viewer=viewer,
                    notify=notify,
                    input_required=modern,
                    ask=ask,
                    parsed=parsed if isinstance(parsed, PromptGet) else None,
                )
            if method in _TOOLS:
                if not self.prompts_as_tools:
                    raise MethodNotFound(f"Method not found: {shown(method)}")
                if method == "tools/list":
                    if (params or {}).get("cursor") is not None:  # one page, no cursor issued: any is invalid
                        raise InvalidCursor("tools/list is one page")
                    return await self._tools(catalog, viewer)
                return await self._call_tool(params, viewer=viewer, notify=notify, modern=modern, ask=ask, who=who)
            if not completions:
                raise MethodNotFound("Method not found: completion/complete (no upstream offers completions)")
            completion = parsed if isinstance(parsed, CompleteParams) else None
            return await catalog.complete(params, viewer=viewer, notify=notify, ask=ask, parsed=completion)

    def _audited_skill_read(
        self, catalog: Catalog, method: str, params: dict[str, Any] | None, who: Identity | None, *, declared: bool
    ) -> AbstractContextManager[None]:
        """A skill read's audit, as a prompt get's: its params checked first (an invalid one audited as
        such), its URI and upstream named. Nothing is audited where the methods are unknown (-32601): no
        skill is served, and the session was not told of skills at its start (``declared``)."""
        if self._audit is None or not (catalog.skills.offered or declared):
            return nullcontext()
        try:
            parse_skill_read(method, params)
        except InvalidParams as exc:
            self._audit.invalid(who, method, params, exc.message)
            raise
        return self._audit.request(who, method, params, catalog.skills.upstream_of(skill_of(method, params)))

    async def _tools(self, catalog: Catalog, viewer: Viewer | None) -> dict[str, Any]:
        names = [prompt["name"] for prompt in (await catalog.all_prompts(viewer=viewer))["prompts"]]
        return {
            "tools": prompt_tools.tool_definitions(names),
            "ttlMs": 0,  # the names in get_prompt's schema change with the catalog: ask again, or listen
            "cacheScope": "public" if viewer is None else "private",
        }

    async def _call_tool(
        self,
        params: dict[str, Any] | None,
        *,
        viewer: Viewer | None,
        notify: Notify,
        modern: bool,
        ask: Ask | None,
        who: Identity | None,
    ) -> dict[str, Any]:
        """A tool call, served by the prompt methods themselves (so policy, views and the audit apply
        as they do there); what goes wrong with the call is a tool error the model can read."""
        try:
            call = prompt_tools.parse_call(params)
        except prompt_tools.ToolInputError as exc:
            return prompt_tools.error_result(f"Invalid input: {exc}")
        try:
            if isinstance(call, prompt_tools.ListCall):
                listing = await self._catalog().all_prompts(viewer=viewer)
                return prompt_tools.list_result(listing["prompts"], call, listing["unavailable"])
            rendered = await self.serve(
                "prompts/get",
                {"name": call.name, "arguments": call.arguments},
                viewer=viewer,
                notify=notify,
                completions=False,
                modern=False,  # a tool result cannot ask for more input: said as an error instead
                ask=ask,
                who=who,
            )
            return prompt_tools.get_result(rendered)
        except GatewayError as exc:
            return prompt_tools.error_result(exc.message)

    async def _listen(
        self, request: Request, notify: Notify, viewer: Viewer | None, who: Identity | None = None
    ) -> dict[str, Any]:
        wanted = (request.params or {}).get("notifications")
        if not isinstance(wanted, dict):
            raise InvalidParams("Invalid params: notifications must be an object naming what to listen for")
        prompts = wanted.get("promptsListChanged") is True
        tools = wanted.get("toolsListChanged") is True and self.prompts_as_tools
        resources = wanted.get("resourcesListChanged") is True and self.offers_skills
        tag = {SUBSCRIPTION_ID_KEY: request.id}
        left = seconds_left(who.valid_until if who is not None else None, time.time())
        until = None if left is None else anyio.current_time() + left
        subscription = Subscription(
            prompts=prompts, tools=tools, resources=resources, viewer=viewer, who=who, until=until
        )
        self._hub.add(subscription)
        try:
            honoured = {"promptsListChanged": True} if prompts else {}
            if tools:
                honoured["toolsListChanged"] = True
            if resources:
                honoured["resourcesListChanged"] = True
            await notify("notifications/subscriptions/acknowledged", {"_meta": tag, "notifications": honoured})
            while lists := await subscription.next_change():
                if prompts and PROMPTS & lists:
                    await notify("notifications/prompts/list_changed", {"_meta": tag})
                if tools and PROMPTS & lists:
                    await notify("notifications/tools/list_changed", {"_meta": tag})
                if resources and SKILLS & lists:  # skill files (docs/skills.md): no notification of their own
                    await notify("notifications/resources/list_changed", {"_meta": tag})
            return {"_meta": tag}
        finally:
            self._hub.discard(subscription)

    def observe(self, method: str) -> AbstractContextManager[None]:
        if self._metrics is None or method == "subscriptions/listen":  # a listen's duration is no latency
            return nullcontext()
        return self._metrics.observe(method if method in KNOWN_METHODS else "other")
