"""The HTTP front end: MCP Streamable HTTP at ``path`` in both eras (stateless 2026-07-28 requests and
2025-03-26 .. 2025-11-25 sessions, told apart by the request's ``_meta`` envelope), and the legacy
HTTP+SSE transport (2024-11-05) at ``sse_path`` + ``messages_path``. A Starlette app served by uvicorn.

It knows HTTP, sessions and JSON-RPC framing; what the messages mean is the business of an
``Endpoint`` (a ``ClientSession``) or of the ``Stateless`` handler, so nothing here knows about prompts.
A stateless request is checked here for what HTTP adds (headers mirroring the body) and answered with
the status its error code calls for; closing its response stream cancels it. Every request passes the same guard:
Host and Origin validation (DNS rebinding), then bearer-token authentication (constant-time, against
every configured token). A session belongs to the token that created it: any other caller gets 404,
exactly as for a session that does not exist.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import anyio
import structlog
import structlog.contextvars
from anyio.abc import TaskGroup
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.cluster.replicas import NoCluster, RedisCluster
from gateway.cluster.session_ids import SessionIds
from gateway.config import ServerSettings
from gateway.frontend.http.credentials_expiry import until_credentials_expire
from gateway.frontend.http.guard import Guard
from gateway.frontend.http.legacy_sse import LegacySsePath
from gateway.frontend.http.messages import (
    REQUEST_ID_KEY,
    JsonAnswer,
    accepts,
    decimal_header,
    headers_of,
    plain,
    refused,
    wants_progress,
)
from gateway.frontend.http.sessions import (
    EndpointFactory,
    HttpSession,
    SessionStore,
    Stateless,
)
from gateway.frontend.http.stateless import StatelessPath
from gateway.identity.audit import RefusedRequest
from gateway.identity.fair_share import FairShare, default_share
from gateway.identity.principal import Grant, Identity, key_of
from gateway.identity.protected_resource import metadata_document, metadata_paths
from gateway.observability.tracing import RECEIVED_OVER, arrival_over_http, tracing
from gateway.protocol.jsonrpc import (
    Batch,
    Notification,
    Request,
    dumps,
)
from gateway.protocol.modern import carries_envelope, in_batch
from gateway.protocol.versions import HANDSHAKE_VERSIONS, MODERN_VERSIONS
from gateway.transports.sse import epoch_of

log = structlog.get_logger("gateway.http")


_MCP_METHODS = frozenset({"POST", "GET", "DELETE"})


STOPPED_BEFORE_ANSWERING = (
    "Service Unavailable: the gateway stopped before this request was answered (shutdown_grace_s ran out)"
)
"""What a request still running when the stop's grace ends is told, under its id (uvicorn answered a
plain-text 500)."""


class HttpFrontend(StatelessPath, LegacySsePath):
    def __init__(
        self,
        settings: ServerSettings,
        factory: EndpointFactory,
        *,
        stateless: Stateless,
        max_message_bytes: int,
        max_in_flight: int = 64,
        on_refused: Callable[[RefusedRequest], None] | None = None,
        session_ids: SessionIds | None = None,
        cluster: NoCluster | RedisCluster | None = None,
    ) -> None:
        self.settings = settings
        self._stateless = stateless
        self._on_refused = on_refused
        # Sessions, stateless requests and stateless streams (listen, progress) are bounded apart, each by
        # max_sessions (a stateless request costs what a session does) with a share per token inside it:
        # idle listen streams cannot starve requests, nor one token everyone else.
        identities = len(settings.tokens) + (2 if settings.auth is not None else 0)  # OAuth: people, many
        share = settings.max_sessions_per_identity or default_share(settings.max_sessions, identities)
        self.store = SessionStore(
            settings,
            factory,
            share=share,
            max_in_flight=max_in_flight,
            ids=session_ids or SessionIds(),
            cluster=cluster or NoCluster(),
        )
        self.store.cluster.handlers.legacy = self._posted_elsewhere
        self._request_share = FairShare(settings.max_sessions, share)
        self._stream_share = FairShare(settings.max_sessions, share)
        self._max_message_bytes = max_message_bytes
        self._guard = Guard(settings)
        self._watches: set[asyncio.Task[None]] = set()

    async def access_token_grant(self, token: str) -> Grant | None:
        return await self._guard.grant_of(token)

    def host_refusal(self, request: HttpRequest) -> Response | None:
        return self._guard.host_refusal(request)

    @property
    def sessions(self) -> dict[str, HttpSession]:
        return self.store.sessions

    def close_all(self) -> None:
        self.store.close_all()

    def app(self, extra_routes: Sequence[Route] = ()) -> ASGIApp:
        """The MCP endpoint is served straight from ASGI (Starlette's middleware and routing layers cost a
        tenth of the gateway's CPU per request on the hot path); everything else goes through Starlette."""
        s = self.settings
        routes = [
            Route(s.path, self._mcp, methods=list(_MCP_METHODS)),
            Route(s.sse_path, self._legacy_stream, methods=["GET"]),
            Route(s.messages_path, self._legacy_message, methods=["POST"]),
            *extra_routes,
        ]
        if s.auth is not None:  # RFC 9728: where clients learn which authorization servers issue tokens here
            document = metadata_document(s.auth)

            async def protected_resource_metadata(request: HttpRequest) -> Response:
                return JSONResponse(document, headers={"Cache-Control": "max-age=3600"})

            routes += [
                Route(path, protected_resource_metadata, methods=["GET"]) for path in metadata_paths(s.auth.resource)
            ]
        routed = Starlette(routes=routes)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and tracing().enabled:  # what the request's spans say of its transport
                RECEIVED_OVER.set(arrival_over_http(scope))
            if scope["type"] == "http" and scope["path"] == s.path and scope["method"] in _MCP_METHODS:
                try:
                    response = await self._mcp(HttpRequest(scope, receive, send))
                except ClientDisconnect:
                    return  # gone while sending its body: there is no one to answer
                except asyncio.CancelledError:  # uvicorn ends what shutdown_grace_s left running: said so
                    stopped = plain(503, STOPPED_BEFORE_ANSWERING, request_id=scope.get(REQUEST_ID_KEY))
                    await stopped(scope, receive, send)
                    return  # (the task is ending: uvicorn cancelled it to end it)
                await response(scope, receive, send)
            else:
                await routed(scope, receive, send)

        return app

    async def run_housekeeping(self, task_group: TaskGroup) -> None:
        """Own the background work (legacy requests, idle-session expiry, the other replicas) until cancelled."""
        self.store.task_group = task_group
        task_group.start_soon(self.store.cluster.run)
        try:
            while True:
                await anyio.sleep(min(60.0, self.settings.session_idle_timeout_s / 2, self.store.ids.ttl_s / 4))
                self.store.expire_idle()
                self.store.expire_lapsed()
        finally:
            self.store.task_group = None
            self.store.close_all()
            for watch in list(self._watches):  # they end with their request; none outlives the front end
                watch.cancel()

    async def _mcp(self, request: HttpRequest) -> Response:
        principal, refusal = await self._guard.check(request)
        if refusal is not None:
            return await self._refused(request, refusal, principal)
        if request.method == "POST":
            return await self._post(request, principal)
        version = headers_of(request).get("mcp-protocol-version")
        if version in MODERN_VERSIONS:  # 2026-07-28 has no GET stream and no sessions to DELETE
            return plain(405, "Method Not Allowed: 2026-07-28 clients POST every request", Allow="POST")
        if version is not None and version not in HANDSHAKE_VERSIONS:
            return plain(400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")
        session = await self.store.lookup(request, principal, headers_of(request).get("mcp-session-id"))
        if isinstance(session, Response):  # audited: another identity's session is refused as none (404)
            return await self._refused(request, session, principal)
        if request.method == "DELETE":
            self.store.remember_ended(session.id, session.expires)
            self.store.end(session, "deleted by client")
            await self.store.cluster.deleted(session.id, session.expires or time.time() + self.store.ids.ttl_s)
            return Response(status_code=200)
        return await self._get(request, session, principal)

    async def _post(self, request: HttpRequest, principal: Identity | None) -> Response:
        if not accepts(request, "application/json"):
            return plain(406, "Not Acceptable: the client must accept application/json")
        content_type = headers_of(request).get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return plain(415, "Unsupported Media Type: Content-Type must be application/json")
        message = await self._read_message(request)
        if isinstance(message, Response):
            return message
        version = headers_of(request).get("mcp-protocol-version")
        if isinstance(message, Request) and (
            version in MODERN_VERSIONS or (message.method != "initialize" and carries_envelope(message.params))
        ):
            return await self._serve_stateless(request, message, principal)  # initialize included: 404, removed
        if isinstance(message, Notification) and version in MODERN_VERSIONS:
            return Response(status_code=202)  # 2026-07-28 defines no client notifications over HTTP
        if isinstance(message, Batch) and version in MODERN_VERSIONS:  # (it was told its version is unsupported)
            return plain(400, "Bad Request: 2026-07-28 has no batches: send each request in a POST of its own")
        if version in MODERN_VERSIONS:  # a response (it was told its version is unsupported)
            return plain(
                400,
                "Bad Request: 2026-07-28 clients send no JSON-RPC responses: the answer to a server's question "
                "goes in the request retried with inputResponses",
            )
        if version is not None and version not in HANDSHAKE_VERSIONS:
            return refused(request, 400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")
        if isinstance(message, Request) and message.method == "initialize":
            return await self._initialize(message, principal)
        session = await self.store.lookup(request, principal, headers_of(request).get("mcp-session-id"))
        if isinstance(session, Response):  # audited: another identity's session is refused as none (404)
            return await self._refused(request, session, principal)
        if isinstance(message, Request) and wants_progress(message) and accepts(request, "text/event-stream"):
            if self.store.task_group is None:
                return refused(request, 503, "Service Unavailable: shutting down")
            return self._stream(session, self._answer_events(lambda notify: self._serve_one(session, message, notify)))
        items = in_batch(message).items if isinstance(message, Batch) else (message,)
        answers = await self._serve_items(session, items)
        if not answers:
            return Response(status_code=202)
        if isinstance(message, Batch):
            return JsonAnswer(dumps(answers))
        return JsonAnswer(dumps(answers[0]))

    async def _initialize(self, message: Request, principal: Identity | None) -> Response:
        session = self.store.new_session(principal, legacy=False, request_id=message.id)
        if isinstance(session, Response):
            return session
        answers = await self._serve_items(session, (message,))
        negotiated = session.endpoint.negotiated()
        if not answers or "error" in answers[0] or negotiated is None:
            self.store.end(session, "initialize failed")
            return JSONResponse(answers[0] if answers else None)
        if self.store.sessions.pop(session.id, None) is None:  # ended while it initialized (shutting down, evicted)
            ended = "Service Unavailable: the session ended while it initialized"
            return plain(503, ended, request_id=message.id, **{"Retry-After": "1"})
        now = time.time()
        sealed = self.store.ids.issue(
            protocol_version=negotiated.protocol_version,
            principal=key_of(principal),
            capabilities=negotiated.capabilities,
            client_name=negotiated.client_name,
            now=now,
        )
        session.id, session.expires = sealed, now + self.store.ids.ttl_s
        self.store.sessions[sealed] = session
        await self.store.share_activity(session)
        log.info("session_started", session=session.id[:8], principal=key_of(principal))
        return JsonAnswer(dumps(answers[0]), headers={"Mcp-Session-Id": session.id})

    async def _get(self, request: HttpRequest, session: HttpSession, principal: Identity | None) -> Response:
        """The session's stream, for as long as the credentials of this request are accepted."""
        if session.legacy:
            return plain(400, "Bad Request: this is a legacy HTTP+SSE session")
        if not accepts(request, "text/event-stream"):
            return plain(406, "Not Acceptable: the client must accept text/event-stream")
        last = headers_of(request).get("last-event-id")
        after = decimal_header(last)
        if last is not None and after is None:
            return plain(400, "Bad Request: Last-Event-ID must be an event id this server sent (ASCII digits)")
        if session.streams:
            return plain(409, "Conflict: this session already has an open stream")
        if after is not None and not session.events.issued(after):
            # An event id another replica (or this one before a restart) numbered: what it sent since is
            # not here to replay. The client is told to list again unless the catalog's epoch (replicas
            # sharing Redis count changes) shows that nothing changed since that event.
            then, now = epoch_of(after), self.store.cluster.epoch()
            relist = then is None or now is None or now != then
            log.info("stream_resumed", session=session.id[:8], relist=relist)
            after = None
            if relist:
                session.endpoint.list_changed()
        await self.store.cluster.hold_stream(session.id)
        events = until_credentials_expire(self._events(session, after), principal)
        return self._stream(session, events, on_close=lambda: self._released(session), counted=True)
