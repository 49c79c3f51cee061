"""The MCP server side: one ``ClientSession`` per connected client, and the ``Hub`` that fans
``notifications/prompts/list_changed`` out to every initialized session.

A session is transport-agnostic: a front end (stdio through an ``RpcPeer``, HTTP through
``http_server``) feeds it requests, with a ``notify`` for each, and a non-blocking callback that
announces list changes. Session states live in ``_ALLOWED``:

    new ──initialize──► initializing ──notifications/initialized──► ready ──► closed

Requests other than ping before ``initialize`` are refused; requests after the initialize answer
but before ``initialized`` are served (clients race it, and nothing here depends on it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import structlog

from gateway import __version__
from gateway.catalog import Catalog
from gateway.errors import InvalidRequest, MethodNotFound
from gateway.metrics import Metrics
from gateway.policy import Rules
from gateway.protocol.jsonrpc import Notification, Request
from gateway.protocol.versions import negotiate
from gateway.rpc import Notify

SessionState = Literal["new", "initializing", "ready", "closed"]
SERVER_INFO = {"name": "mcp-prompt-gateway", "title": "MCP Prompt Gateway", "version": __version__}

_ALLOWED: dict[SessionState, frozenset[str]] = {
    "new": frozenset({"initialize", "ping"}),
    "initializing": frozenset({"ping", "prompts/list", "prompts/get", "completion/complete"}),
    "ready": frozenset({"ping", "prompts/list", "prompts/get", "completion/complete"}),
    "closed": frozenset(),
}
_KNOWN_METHODS = frozenset().union(*_ALLOWED.values())


class ClientSession:
    def __init__(
        self,
        catalog: Callable[[], Catalog],
        *,
        completions: Callable[[], bool],
        on_list_changed: Callable[[], None],
        viewer: Rules | None = None,
        session_id: str | None = None,
        on_close: Callable[[], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._catalog = catalog
        self._offers_completions = completions
        self._completions = False  # fixed at initialize: capabilities do not change within a session
        self._viewer = viewer
        self.state: SessionState = "new"
        self.protocol_version: str | None = None
        self.client_info: dict[str, Any] = {}
        self._on_list_changed = on_list_changed
        self._on_close = on_close
        self._metrics = metrics
        self.log = structlog.get_logger("gateway.session").bind(session=session_id)

    async def handle_request(self, request: Request, notify: Notify) -> dict[str, Any]:
        if self._metrics is None:
            return await self._handle(request, notify)
        with self._metrics.observe(request.method if request.method in _KNOWN_METHODS else "other"):
            return await self._handle(request, notify)

    async def _handle(self, request: Request, notify: Notify) -> dict[str, Any]:
        method = request.method
        if method not in _ALLOWED[self.state]:
            if method == "initialize":
                raise InvalidRequest("Invalid Request: the session is already initialized")
            if method in _KNOWN_METHODS and self.state == "new":
                raise InvalidRequest(f"Invalid Request: {method} before initialize")
            raise MethodNotFound(f"Method not found: {method}")
        if method == "ping":
            return {}
        if method == "initialize":
            return self._initialize(request.params or {})
        if method == "prompts/list":
            return await self._catalog().list_prompts(request.params, viewer=self._viewer)
        if method == "prompts/get":
            return await self._catalog().get_prompt(request.params, viewer=self._viewer, notify=notify)
        if not self._completions:
            raise MethodNotFound("Method not found: completion/complete (no upstream offers completions)")
        return await self._catalog().complete(request.params, viewer=self._viewer, notify=notify)

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        self.protocol_version = negotiate(params.get("protocolVersion"))
        info = params.get("clientInfo")
        self.client_info = info if isinstance(info, dict) else {}
        self.state = "initializing"
        self._completions = self._offers_completions()
        self.log = self.log.bind(client=self.client_info.get("name"), protocol_version=self.protocol_version)
        self.log.info("session_initialized", requested=params.get("protocolVersion"))
        capabilities: dict[str, Any] = {"prompts": {"listChanged": True}}
        if self._completions:
            capabilities["completions"] = {}
        return {"protocolVersion": self.protocol_version, "capabilities": capabilities, "serverInfo": SERVER_INFO}

    async def handle_notification(self, notification: Notification) -> None:
        if notification.method == "notifications/initialized" and self.state == "initializing":
            self.state = "ready"

    def list_changed(self) -> None:
        """Announce a list change if the client has initialized. The transport's callback must not block:
        one slow client cannot be allowed to stall the fan-out to the others."""
        if self.state in ("initializing", "ready"):
            self._on_list_changed()

    def close(self) -> None:
        if self.state != "closed":
            self.state = "closed"
            if self._on_close is not None:
                self._on_close()


class Hub:
    """The set of live sessions; ``broadcast_list_changed`` reaches each of them once."""

    def __init__(self) -> None:
        self._sessions: set[ClientSession] = set()

    def add(self, session: ClientSession) -> None:
        self._sessions.add(session)

    def discard(self, session: ClientSession) -> None:
        self._sessions.discard(session)

    def __len__(self) -> int:
        return len(self._sessions)

    def broadcast_list_changed(self) -> int:
        for session in self._sessions:
            session.list_changed()
        return len(self._sessions)
