"""One client's session in the handshake era (stdio, or a Streamable HTTP session): its states (new →
initializing → ready → closed) in one table, what it negotiated, and its requests served by the prompt
service; a 2026-07-28 request on it is passed to the service's stateless path.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from gateway.catalog.policy import Viewer
from gateway.cluster.session_ids import Negotiated, SealedState
from gateway.frontend.service import _ALLOWED, SERVER_INFO, PromptService, SessionState
from gateway.identity.principal import Identity
from gateway.observability.tracing import RECEIVED_OVER, tracing
from gateway.protocol.eras import for_client
from gateway.protocol.errors import InvalidRequest, MethodNotFound, shown
from gateway.protocol.jsonrpc import Notification, Request
from gateway.protocol.lists import EVERY_LIST, SKILLS, Lists
from gateway.protocol.models import InitializeParams, parse_params
from gateway.protocol.modern import (
    carries_envelope,
)
from gateway.protocol.versions import negotiate
from gateway.rpc import Notify
from gateway.sources.client_requests import Ask, asking


class ClientSession:
    def __init__(
        self,
        service: PromptService,
        *,
        on_list_changed: Callable[[Lists], None],
        viewer: Viewer | None = None,
        session_id: str | None = None,
        on_close: Callable[[], None] | None = None,
        who: Identity | None = None,
    ) -> None:
        self._service = service
        self._who = who
        self.viewer = viewer
        self._completions = False  # fixed at initialize: capabilities do not change within a session
        self._told_skills: bool | None = None  # whether its initialize declared resources (skill files)
        self.state: SessionState = "new"
        self.protocol_version: str | None = None
        self.client_info: dict[str, Any] = {}
        self.client_capabilities: dict[str, Any] = {}
        self.ask_client: Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]] | None = None
        """How to send this client a request (set by a transport that can: stdio)."""
        self._ask: Ask | None = None
        self._on_list_changed = on_list_changed
        self._on_close = on_close
        self._session_id = session_id
        self._began = time.monotonic()
        self._arrival = RECEIVED_OVER.get()
        self.log = structlog.get_logger("gateway.session").bind(session=session_id[:8] if session_id else None)

    @property
    def who(self) -> Identity | None:
        """Whose session this is (a reload's new policies are judged for them again)."""
        return self._who

    async def handle_request(self, request: Request, notify: Notify) -> dict[str, Any]:
        with self._service.observe(request.method):
            if request.method != "initialize" and carries_envelope(request.params):
                return await self._service.modern(request, notify, viewer=self.viewer, who=self._who)
            version = self.protocol_version or _asked_version(request)
            with tracing().server(request, mcp_version=version, session_id=self._session_id):
                await self._service.admit(self._who, request.method, request.params)
                return await self._handle_legacy(request, notify)

    async def _handle_legacy(self, request: Request, notify: Notify) -> dict[str, Any]:
        method = request.method
        if method not in _ALLOWED[self.state]:
            if method == "initialize":
                raise InvalidRequest("Invalid Request: the session is already initialized")
            if method in _ALLOWED["ready"] and self.state == "new":
                raise InvalidRequest(f"Invalid Request: {method} before initialize")
            raise MethodNotFound(f"Method not found: {shown(method)}")
        if method == "ping":
            return {}
        if method == "initialize":  # at once, whatever the upstreams do: a listing is what may wait for them
            return self._initialize(request.params or {})
        assert self.protocol_version is not None  # noqa: S101 - _ALLOWED admits these only after initialize
        result = await self._service.serve(
            method,
            request.params,
            viewer=self.viewer,
            notify=notify,
            completions=self._completions,
            modern=False,
            ask=self._ask,
            who=self._who,
            skills_declared=self._told_skills is True,
        )
        return for_client(method, result, self.protocol_version, SERVER_INFO)

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        parse_params(InitializeParams, params)  # -32602 naming the field: no session begins on a wrong one
        self.protocol_version = negotiate(params.get("protocolVersion"))
        info = params.get("clientInfo")
        self.client_info = info if isinstance(info, dict) else {}
        capabilities = params.get("capabilities")
        self.client_capabilities = capabilities if isinstance(capabilities, dict) else {}
        if self.ask_client is not None:
            self._ask = asking(self.ask_client, self.client_capabilities)
        self.state = "initializing"
        self._completions = self._service.offers_completions()
        self.log = self.log.bind(client=self.client_info.get("name"), protocol_version=self.protocol_version)
        self.log.info("session_initialized", requested=params.get("protocolVersion"))
        capabilities = self._service.capabilities(completions=self._completions)
        self._told_skills = "resources" in capabilities
        return {"protocolVersion": self.protocol_version, "capabilities": capabilities, "serverInfo": SERVER_INFO}

    def negotiated(self) -> Negotiated | None:
        if self.protocol_version is None:
            return None
        name = self.client_info.get("name")
        return Negotiated(self.protocol_version, self.client_capabilities, name if isinstance(name, str) else None)

    def resume(self, state: SealedState) -> None:
        """Carry on a session initialized elsewhere (another replica, or this one before a restart)."""
        self.protocol_version = state.protocol_version
        self.client_info = {"name": state.client_name} if state.client_name is not None else {}
        self.client_capabilities = dict(state.capabilities)
        if self.ask_client is not None:
            self._ask = asking(self.ask_client, self.client_capabilities)
        self._completions = self._service.offers_completions()
        self.state = "ready"
        self.log = self.log.bind(client=state.client_name, protocol_version=state.protocol_version)

    async def handle_notification(self, notification: Notification) -> None:
        if notification.method == "notifications/initialized" and self.state == "initializing":
            self.state = "ready"

    def list_changed(self, lists: Lists = EVERY_LIST) -> None:
        """Announce a change of these lists if the client has initialized (a modern client listens
        instead). The transport's callback must not block: one slow client must not stall the fan-out to
        the others."""
        if self.state not in ("initializing", "ready"):
            return
        # skill files are resources: told to a session whose initialize declared them, however many skills
        # are served now (the last skills upstream removed is a change too); resumed, as served now
        told_skills = self._service.offers_skills if self._told_skills is None else self._told_skills
        lists = lists if told_skills else lists - SKILLS
        if lists:
            self._on_list_changed(lists)

    def close(self) -> None:
        if self.state != "closed":
            if self.protocol_version is not None:  # a session that began (not a refused initialize)
                duration = time.monotonic() - self._began
                tracing().session_ended(duration, mcp_version=self.protocol_version, arrival=self._arrival)
            self.state = "closed"
            if self._on_close is not None:
                self._on_close()


def _asked_version(request: Request) -> str | None:
    """The revision an ``initialize`` will settle on (what its span records, before it is served)."""
    if request.method != "initialize":
        return None
    return negotiate((request.params or {}).get("protocolVersion"))
