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
import hmac
import json
import math
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import anyio
import structlog
import structlog.contextvars
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.cluster.replicas import NoCluster, RedisCluster, session_key
from gateway.config import ServerSettings, TokenSettings

if TYPE_CHECKING:
    from gateway.identity.access_tokens import AccessTokenValidator
from gateway.cluster.session_ids import Negotiated, SealedState, SessionIds
from gateway.identity.audit import RefusedRequest
from gateway.identity.fair_share import FairShare, default_share
from gateway.identity.principal import Identity, key_of
from gateway.identity.protected_resource import challenge, metadata_document, metadata_paths
from gateway.protocol.errors import ClientError, GatewayError
from gateway.protocol.jsonrpc import (
    Batch,
    ErrorResponse,
    Malformed,
    Message,
    Notification,
    Request,
    decode,
    dumps,
    encode,
    error_response,
    request_id_of,
    to_wire,
)
from gateway.protocol.jsonrpc import (
    Response as RpcResponse,
)
from gateway.protocol.modern import HTTP_STATUS_FOR_CODE, carries_envelope, check_headers, read_envelope
from gateway.protocol.versions import HANDSHAKE_VERSIONS, MODERN_VERSIONS
from gateway.rpc import InboundRequests, Notify, PeerClosed, RemoteError, RequestTimeout, answer
from gateway.transports.sse import KEEPALIVE, KEEPALIVE_S, EventLog, encode_event, epoch_of

log = structlog.get_logger("gateway.http")

REQUEST_CANCELLED = -32800
MAX_ENDED_REMEMBERED = 100_000
_MCP_METHODS = frozenset({"POST", "GET", "DELETE"})
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


class Endpoint(Protocol):
    """The MCP session behind an HTTP session."""

    async def handle_request(self, request: Request, notify: Notify) -> dict[str, Any]: ...

    async def handle_notification(self, notification: Notification) -> None: ...

    def close(self) -> None: ...

    def negotiated(self) -> Negotiated | None:
        """What initialize settled (None before): sealed into the session id."""

    def resume(self, state: SealedState) -> None:
        """Become the initialized session a sealed id describes (made on another replica, or before a restart)."""

    def list_changed(self) -> None:
        """Tell the client its lists may have changed (on its event stream)."""


Push = Callable[[bytes, str | None], None]
"""Queue a server-to-client frame on the session's stream: ``push(frame, coalesce_key)``; never blocks."""

Ask = Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]]
"""Send the session's client a request and wait for its result (raises RemoteError with its error,
PeerClosed when the client cannot be reached, RequestTimeout when it does not answer in time)."""

EndpointFactory = Callable[[Identity | None, str, Push, Ask], Endpoint]
"""``factory(principal, session_id, push, ask)`` makes the endpoint for a new session."""

STREAM_WAIT_S = 5.0
"""How long a request to a client waits for the client to open an event stream it can be sent on."""

ASK_TIMEOUT_S = 600.0
"""How long a request to a client (an elicitation a person answers) may wait for the answer."""

Stateless = Callable[[Request, Notify, Identity | None], Awaitable[dict[str, Any]]]
"""``handler(request, notify, principal)`` answers one 2026-07-28 request, no session involved."""


@dataclass
class HttpSession:
    id: str
    principal: Identity | None
    endpoint: Endpoint
    inbound: InboundRequests
    events: EventLog
    legacy: bool
    last_seen: float = field(default_factory=time.monotonic)
    shared_activity: float = -math.inf  # when the other replicas were last told it is in use
    streams: int = 0
    expires: float | None = None  # a sealed id's end (Unix time)
    relay: NoCluster | RedisCluster | None = None  # the other replicas, one of which may hold the stream
    stream_opened: anyio.Event = field(default_factory=anyio.Event)
    asked: dict[str, MemoryObjectSendStream[RpcResponse | ErrorResponse]] = field(default_factory=dict)
    """Requests sent to the client on its event stream, by id, waiting for the answer it POSTs."""

    async def ask(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """A request to the client: sent on its event stream (the GET stream, or the legacy SSE stream),
        here or, through Redis, on the replica holding it; answered by a POST carrying the response (to
        any replica: the id names the one asking). Refused when no stream is open to send it on."""
        replica = self.relay.replica if self.relay is not None else "local"
        request_id = f"gateway-{replica}-{secrets.token_urlsafe(9)}"
        frame = encode(Request(request_id, method, params))
        answers_in, answers = anyio.create_memory_object_stream[RpcResponse | ErrorResponse](1)
        self.asked[request_id] = answers_in
        try:
            if self.streams:
                self.events.push(frame)
            elif self.relay is None or not await self.relay.ask_through_holder(self.id, frame):
                with anyio.move_on_after(STREAM_WAIT_S):  # a client opens its GET stream after initialize
                    await self.stream_opened.wait()
                if not self.streams:
                    raise PeerClosed(f"the client has no open event stream to send {method} on")
                self.events.push(frame)
            with anyio.fail_after(ASK_TIMEOUT_S):
                answered = await answers.receive()
        except TimeoutError:
            raise RequestTimeout(f"the client did not answer {method}") from None
        finally:
            self.asked.pop(request_id, None)
            answers_in.close()
            answers.close()
        if isinstance(answered, ErrorResponse):
            raise RemoteError(answered.error)
        return answered.result

    def take_answer(self, message: RpcResponse | ErrorResponse) -> bool:
        """The client's answer to one of ``ask``'s requests here; whether one was waiting for it."""
        waiting = self.asked.pop(str(message.id), None) if isinstance(message.id, str) else None
        if waiting is None:
            return False
        with suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            waiting.send_nowait(message)
        return True


def _error_body(error: GatewayError, request_id: Any = None) -> dict[str, Any]:
    return to_wire(error_response(request_id, error))


def _plain(status: int, message: str, **headers: str) -> JSONResponse:
    """An HTTP-level refusal with a JSON-RPC error body that has no id, as the spec permits."""
    code = -32600 if status < 500 else -32603
    return JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def _host_port(value: str, default_scheme: str = "") -> tuple[str, str, str | None]:
    parts = urlsplit(value if "://" in value else f"{default_scheme or 'http'}://{value}")
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = str(parts.port) if parts.port is not None else None
    except ValueError:
        port = "invalid"
    return parts.scheme.lower(), host, port


def _matches(value: str, patterns: Sequence[str], *, with_scheme: bool) -> bool:
    """``http://localhost:*`` style patterns: scheme and host exact, port exact or ``*``."""
    scheme, host, port = _host_port(value)
    for pattern in patterns:
        p_scheme, p_host, p_port = _host_port(pattern.replace(":*", ":1"))
        if (with_scheme and scheme != p_scheme) or host != p_host:
            continue
        if pattern.endswith(":*") or p_port == port:
            return True
    return False


class Guard:
    """DNS-rebinding protection and authentication, applied to every request before anything else."""

    def __init__(self, settings: ServerSettings) -> None:
        loopback_origins = [f"{s}://{h}:*" for s in ("http", "https") for h in _LOOPBACK_NAMES]
        loopback_origins += [f"{s}://{h}" for s in ("http", "https") for h in _LOOPBACK_NAMES]
        self._origins = [*loopback_origins, *settings.allowed_origins]
        hosts = list(settings.allowed_hosts)
        if not hosts and settings.loopback:  # and the address bound, which may be any of 127.0.0.0/8
            names = dict.fromkeys([*_LOOPBACK_NAMES, f"[{settings.host}]" if ":" in settings.host else settings.host])
            hosts = [f"{h}:*" for h in names] + list(names)
        self._hosts = hosts
        self._tokens: tuple[TokenSettings, ...] = settings.tokens
        self._auth = settings.auth
        self._validator: AccessTokenValidator | None = None
        if settings.auth is not None:  # JOSE and the HTTP client load only where tokens are checked
            from gateway.identity.access_tokens import AccessTokenValidator

            self._validator = AccessTokenValidator(settings.auth)
        # Every request asks the same one or two questions: the answers are kept (bounded: the values
        # come from clients) instead of parsing URLs per request.
        self._host_allowed = lru_cache(maxsize=256)(partial(_matches, patterns=hosts, with_scheme=False))
        self._origin_allowed = lru_cache(maxsize=256)(partial(_matches, patterns=self._origins, with_scheme=True))

    async def check(self, request: HttpRequest) -> tuple[Identity | None, Response | None]:
        """(identity, None) when the request may proceed, else (the identity if one is known, the refusal)."""
        host = _headers(request).get("host", "")
        if self._hosts and not self._host_allowed(host):
            return None, _plain(421, f"Invalid Host header: {host!r}")
        origin = _headers(request).get("origin")
        if origin is not None and not self._origin_allowed(origin):
            return None, _plain(403, f"Forbidden: Origin {origin!r} is not allowed")
        if not self._tokens and self._auth is None:
            return None, None
        scheme, _, presented = _headers(request).get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            return None, self._unauthorized("Unauthorized: a bearer token is required", None)
        candidate = presented.strip()
        name = None
        for token in self._tokens:  # every token is compared, so timing says nothing about which matched
            if hmac.compare_digest(candidate.encode(), token.token.encode()):
                name = token.name
        if name is not None:
            return Identity.token(name), None
        if self._validator is None:
            return None, self._unauthorized("Unauthorized: invalid token", "invalid_token")
        return await self._check_access_token(candidate)

    async def _check_access_token(self, token: str) -> tuple[Identity | None, Response | None]:
        from gateway.identity.access_tokens import IssuerUnavailable, TokenRejected

        assert self._validator is not None  # noqa: S101 - only with [server.auth]
        assert self._auth is not None  # noqa: S101
        try:
            access = await self._validator.validate(token)
        except TokenRejected as exc:
            log.info("token_rejected", reason=str(exc))
            return None, self._unauthorized(f"Unauthorized: invalid token: {exc}", "invalid_token", str(exc))
        except IssuerUnavailable as exc:
            log.warning("issuer_unavailable", error=str(exc))
            unreachable = "Service Unavailable: the token's issuer cannot be reached"
            return None, _plain(503, unreachable, **{"Retry-After": "5"})
        identity = Identity.access_token(access.issuer, access.subject, access.claims)
        missing = [scope for scope in self._auth.scopes_required if scope not in access.scopes]
        if missing:  # known but refused: the identity goes with the refusal, to the audit
            reason = f"the token lacks the scope {' '.join(missing)}"
            header = challenge(self._auth, error="insufficient_scope", description=reason)
            return identity, _plain(403, f"Forbidden: {reason}", **{"WWW-Authenticate": header})
        return identity, None

    def _unauthorized(self, message: str, error: str | None, description: str | None = None) -> Response:
        if self._auth is not None:
            header = challenge(self._auth, error=error, description=description)
        else:
            header = 'Bearer realm="mcp-prompt-gateway"' + (f', error="{error}"' if error else "")
        return _plain(401, message, **{"WWW-Authenticate": header})


_HEADERS_KEY = "gateway.headers"


def _headers(request: HttpRequest) -> dict[str, str]:
    """The request's headers decoded once into a dict, kept in its ASGI scope (Starlette's lookups scan
    and decode the whole list each time, and a request asks for up to ten). ASGI names are lower-case;
    of repeated headers the first wins, as with Starlette."""
    decoded: dict[str, str] | None = request.scope.get(_HEADERS_KEY)
    if decoded is None:
        decoded = {}
        for name, value in request.scope["headers"]:
            decoded.setdefault(name.decode("latin-1"), value.decode("latin-1"))
        request.scope[_HEADERS_KEY] = decoded
    return decoded


_MAX_DECIMAL_DIGITS = 18  # below 2**63: every number a client sends here fits, and none costs a big-int parse


def _decimal(value: str | None) -> int | None:
    """A header's non-negative decimal integer, ASCII digits only (``str.isdigit`` also admits ``²`` and
    ``٣``, which ``int`` refuses or reads); None for anything else, or more than 18 digits."""
    if value is None or not (0 < len(value) <= _MAX_DECIMAL_DIGITS) or not value.isascii() or not value.isdigit():
        return None
    return int(value)


def _accepts(request: HttpRequest, media_type: str) -> bool:
    accept = _headers(request).get("accept")
    if accept is None:
        return True
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(kinds & {media_type, "*/*", media_type.split("/")[0] + "/*"})


async def _read_body(request: HttpRequest, limit: int) -> bytes | None:
    """The body, or None once it exceeds ``limit`` (read no further: memory stays bounded). Read from
    ASGI ``receive`` directly: Starlette's stream generator costs more than the copy."""
    declared = _headers(request).get("content-length")
    if declared is not None and (_decimal(declared) or 0) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await request.receive()
        if message["type"] != "http.request":
            raise ClientDisconnect
        chunk: bytes = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class HttpFrontend:
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
        self._factory = factory
        self._stateless = stateless
        self._on_refused = on_refused
        # Sessions, stateless requests and stateless streams (listen, progress) are bounded apart, each by
        # max_sessions (a stateless request costs what a session does) with a share per token inside it:
        # idle listen streams cannot starve requests, nor one token everyone else.
        identities = len(settings.tokens) + (2 if settings.auth is not None else 0)  # OAuth: people, many
        share = settings.max_sessions_per_identity or default_share(settings.max_sessions, identities)
        self._session_share = FairShare(settings.max_sessions, share)
        self._request_share = FairShare(settings.max_sessions, share)
        self._stream_share = FairShare(settings.max_sessions, share)
        self._max_message_bytes = max_message_bytes
        self._max_in_flight = max_in_flight
        self._guard = Guard(settings)
        self._ids = session_ids or SessionIds()
        self._cluster = cluster or NoCluster()
        self._cluster.handlers.deleted = self._deleted_elsewhere
        self._cluster.handlers.cancel = self._cancelled_elsewhere
        self._cluster.handlers.legacy = self._posted_elsewhere
        self._cluster.handlers.ask = self._asked_elsewhere
        self._cluster.handlers.answer = self._answered_elsewhere
        self.sessions: dict[str, HttpSession] = {}
        self._ended: dict[str, float] = {}  # sealed ids ended here (deleted, idle), until they expire anyway
        self._task_group: TaskGroup | None = None
        self._watches: set[asyncio.Task[None]] = set()

    # ---- app and lifetime ---------------------------------------------------------------------

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
            if scope["type"] == "http" and scope["path"] == s.path and scope["method"] in _MCP_METHODS:
                try:
                    response = await self._mcp(HttpRequest(scope, receive, send))
                except ClientDisconnect:
                    return  # gone while sending its body: there is no one to answer
                await response(scope, receive, send)
            else:
                await routed(scope, receive, send)

        return app

    async def run_housekeeping(self, task_group: TaskGroup) -> None:
        """Own the background work (legacy requests, idle-session expiry, the other replicas) until cancelled."""
        self._task_group = task_group
        task_group.start_soon(self._cluster.run)
        try:
            while True:
                await anyio.sleep(min(60.0, self.settings.session_idle_timeout_s / 2, self._ids.ttl_s / 4))
                self.expire_idle()
                self._expire_lapsed()
        finally:
            self._task_group = None
            self.close_all()
            for watch in list(self._watches):  # they end with their request; none outlives the front end
                watch.cancel()

    def expire_idle(self) -> None:
        """End the sessions idle here for ``session_idle_timeout_s`` (none with an open stream). Alone,
        the gateway knows a session's every request: an idle one is ended for good. With Redis, the
        replicas share when each session was last used: one still in use elsewhere only leaves this
        replica's memory, one idle everywhere is ended on every replica (see ``_end_if_idle_everywhere``)."""
        deadline = time.monotonic() - self.settings.session_idle_timeout_s
        for session in [s for s in self.sessions.values() if s.streams == 0 and s.last_seen < deadline]:
            self._end(session, "idle")
            if isinstance(self._cluster, NoCluster):
                self._remember_ended(session)
            elif self._task_group is not None and session.expires is not None:
                self._task_group.start_soon(self._end_if_idle_everywhere, session.id, session.expires)

    async def _end_if_idle_everywhere(self, session_id: str, expires: float) -> None:
        if await self._cluster.is_active(session_id) is False:  # None: Redis cannot say, so it stays resumable
            self._ended[session_id] = expires
            await self._cluster.deleted(session_id, expires)

    def _expire_lapsed(self) -> None:
        """End the sessions whose life is over (``session_ttl_s``), their open streams with them."""
        now = time.time()
        for session in [s for s in self.sessions.values() if s.expires is not None and s.expires <= now]:
            self._end(session, "expired")

    def close_all(self) -> None:
        for session in list(self.sessions.values()):
            self._end(session, "shutdown")

    def _end(self, session: HttpSession, reason: str) -> None:
        if self.sessions.pop(session.id, None) is not None:
            self._session_share.release(session.principal)
            session.events.close()
            session.endpoint.close()
            log.info("session_ended", session=session.id[:8], reason=reason)

    async def _refused(self, request: HttpRequest, refusal: Response, identity: Identity | None) -> Response:
        """A request refused before it was served (Host, Origin, credentials, scope): audited with who it
        came from where that is known, and what it asked (its body, read within the message bound; else
        its ``Mcp-Method``/``Mcp-Name`` headers), then answered."""
        if self._on_refused is not None:
            try:
                reason = str(json.loads(bytes(refusal.body))["error"]["message"])
            except (ValueError, KeyError, TypeError):
                reason = "refused"
            headers = _headers(request)
            body = None
            if request.method == "POST":
                with suppress(ClientDisconnect):
                    body = await _read_body(request, self._max_message_bytes)
            self._on_refused(
                RefusedRequest(
                    status=refusal.status_code,
                    reason=reason,
                    identity=identity,
                    method=headers.get("mcp-method"),
                    name=headers.get("mcp-name"),
                    body=body,
                )
            )
        return refusal

    def _new_session(
        self, principal: Identity | None, *, legacy: bool, session_id: str | None = None
    ) -> HttpSession | Response:
        if self._session_share.refusal(principal) is not None:
            self.expire_idle()
        if self._session_share.refusal(principal) is not None:
            self._make_room(principal)
        refusal = self._session_share.refusal(principal)
        if refusal is not None:
            return _plain(503, f"Service Unavailable: too many sessions ({refusal})", **{"Retry-After": "5"})
        self._session_share.acquire(principal)
        session_id = session_id or secrets.token_urlsafe(32)  # sealed once initialize has answered
        events = EventLog(max_events=1024 if legacy else 256, epoch=self._cluster.epoch)

        def push(frame: bytes, key: str | None) -> None:
            events.push(frame, key=key)

        session: HttpSession | None = None

        async def ask(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            assert session is not None  # noqa: S101 - made below, before any request is read
            return await session.ask(method, params)

        endpoint = self._factory(principal, session_id, push, ask)
        inbound = InboundRequests(endpoint.handle_request, max_in_flight=self._max_in_flight)
        relay = None if isinstance(self._cluster, NoCluster) else self._cluster
        session = HttpSession(session_id, principal, endpoint, inbound, events, legacy, relay=relay)
        self.sessions[session_id] = session
        return session

    def _make_room(self, principal: Identity | None) -> None:
        """End the least recently used session without an open stream: this identity's own when it is at
        its share, else the largest holder's. A session nobody has used for longest goes first, and one
        identity's sessions never push out another's below the share."""
        share = self._session_share
        at_share = share.per_identity is not None and share.held[principal] >= share.per_identity
        owner = principal if at_share else share.largest_holder()
        idle = [s for s in self.sessions.values() if s.principal == owner and not s.streams and not len(s.inbound)]
        if idle:
            self._end(min(idle, key=lambda s: s.last_seen), "evicted to make room (least recently used)")

    async def _lookup(
        self, request: HttpRequest, principal: Identity | None, session_id: str | None
    ) -> HttpSession | Response:
        if not session_id:
            return _plain(400, "Bad Request: Mcp-Session-Id header is required")
        session = self.sessions.get(session_id)
        if session is None:
            resumed = await self._resume(session_id, principal)
            if isinstance(resumed, Response):
                return resumed
            session = resumed
        if session is None or session.principal != principal:
            return _plain(404, "Session not found")
        if session.expires is not None and session.expires <= time.time():  # session_ttl_s, wherever it is
            self._end(session, "expired")
            return _plain(404, "Session not found")
        session.last_seen = time.monotonic()
        await self._share_activity(session)
        return session

    async def _share_activity(self, session: HttpSession) -> None:
        """Tell the other replicas (Redis) that the session is in use, at most every quarter of the idle
        time-out; the record lives a quarter longer than the time-out, so a session is idle everywhere
        once it is gone (idle at least the time-out, ended within a quarter more)."""
        idle_s = self.settings.session_idle_timeout_s
        if isinstance(self._cluster, NoCluster) or time.monotonic() - session.shared_activity < idle_s / 4:
            return
        session.shared_activity = time.monotonic()
        await self._cluster.active(session.id, idle_s * 1.25)

    async def _resume(self, session_id: str, principal: Identity | None) -> HttpSession | Response | None:
        """The session a sealed id describes, made here (it began on another replica, or before a restart);
        None when the id does not open, belongs to someone else, or its client ended it."""
        now = time.time()
        if session_id in self._ended:
            return None
        state = self._ids.open(session_id, now=now)
        if state is None or state.principal != key_of(principal):
            return None
        if await self._cluster.is_deleted(session_id):
            return None
        idle_s = self.settings.session_idle_timeout_s
        if now - state.created >= idle_s and await self._cluster.is_active(session_id) is False:
            self._ended[session_id] = state.expires  # idle on every replica (their shared record lapsed)
            await self._cluster.deleted(session_id, state.expires)
            return None
        if session_id in self.sessions:  # resumed by a concurrent request meanwhile
            return self.sessions[session_id]
        session = self._new_session(principal, legacy=False, session_id=session_id)
        if isinstance(session, Response):
            return session
        session.endpoint.resume(state)
        session.expires = state.expires
        log.info("session_resumed", session=session_id[:8], principal=key_of(principal), created=state.created)
        return session

    def _local(self, key: str) -> HttpSession | None:
        """A session here by the hash other replicas name it by (rare: deletes, cancels, legacy posts)."""
        return next((s for s in self.sessions.values() if session_key(s.id) == key), None)

    def _deleted_elsewhere(self, key: str) -> None:
        session = self._local(key)
        if session is not None:
            self._remember_ended(session)
            self._end(session, "deleted by client on another replica")

    def _cancelled_elsewhere(self, key: str, request_id: Any) -> None:
        session = self._local(key)
        if session is not None:
            session.inbound.cancel({"requestId": request_id})

    def _posted_elsewhere(self, key: str, principal: str | None, body: bytes) -> bool:
        """A legacy POST another replica received for a stream held here (``principal``: its identity's key)."""
        session = self._local(key)
        if session is None or not session.legacy or key_of(session.principal) != principal or self._task_group is None:
            return False
        try:
            message = decode(body)
        except ClientError:
            return False
        self._task_group.start_soon(self._legacy_serve, session, message)
        return True

    def _asked_elsewhere(self, key: str, frame: bytes) -> None:
        """A request for a client whose event stream is here, from an upstream on another replica."""
        session = self._local(key)
        if session is not None and session.streams:
            session.events.push(frame)

    def _answered_elsewhere(self, key: str, body: bytes) -> None:
        """A client's answer, POSTed to another replica, to a request this replica sent it."""
        session = self._local(key)
        try:
            message = decode(body)
        except ClientError:
            return
        if session is not None and isinstance(message, (RpcResponse, ErrorResponse)):
            session.take_answer(message)

    async def _answer_elsewhere(self, session: HttpSession, message: RpcResponse | ErrorResponse) -> None:
        """A client's answer to a request another replica sent it (the id says which): passed on."""
        parts = str(message.id).split("-", 2) if isinstance(message.id, str) else []
        if len(parts) == 3 and parts[0] == "gateway" and parts[1] != self._cluster.replica:
            await self._cluster.answer_to(parts[1], session.id, dumps(to_wire(message)))

    def _remember_ended(self, session: HttpSession) -> None:
        """An id ended here (its client deleted it, or it idled) must not be resumed here again (other
        replicas: see cluster.py). Keyed by the id's one accepted spelling (session_ids.py)."""
        now = time.time()
        if len(self._ended) >= MAX_ENDED_REMEMBERED:
            self._ended = {sid: until for sid, until in self._ended.items() if until > now}
            while len(self._ended) >= MAX_ENDED_REMEMBERED:
                del self._ended[next(iter(self._ended))]  # the oldest first
        if session.expires is not None:
            self._ended[session.id] = session.expires

    # ---- Streamable HTTP ----------------------------------------------------------------------

    async def _mcp(self, request: HttpRequest) -> Response:
        principal, refusal = await self._guard.check(request)
        if refusal is not None:
            return await self._refused(request, refusal, principal)
        if request.method == "POST":
            return await self._post(request, principal)
        version = _headers(request).get("mcp-protocol-version")
        if version in MODERN_VERSIONS:  # 2026-07-28 has no GET stream and no sessions to DELETE
            return _plain(405, "Method Not Allowed: 2026-07-28 clients POST every request", Allow="POST")
        if version is not None and version not in HANDSHAKE_VERSIONS:
            return _plain(400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")
        session = await self._lookup(request, principal, _headers(request).get("mcp-session-id"))
        if isinstance(session, Response):
            return session
        if request.method == "DELETE":
            self._remember_ended(session)
            self._end(session, "deleted by client")
            await self._cluster.deleted(session.id, session.expires or time.time() + self._ids.ttl_s)
            return Response(status_code=200)
        return await self._get(request, session)

    async def _post(self, request: HttpRequest, principal: Identity | None) -> Response:
        if not _accepts(request, "application/json"):
            return _plain(406, "Not Acceptable: the client must accept application/json")
        content_type = _headers(request).get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return _plain(415, "Unsupported Media Type: Content-Type must be application/json")
        message = await self._read_message(request)
        if isinstance(message, Response):
            return message
        version = _headers(request).get("mcp-protocol-version")
        if isinstance(message, Request) and (
            version in MODERN_VERSIONS or (message.method != "initialize" and carries_envelope(message.params))
        ):
            return await self._serve_stateless(request, message, principal)  # initialize included: 404, removed
        if isinstance(message, Notification) and version in MODERN_VERSIONS:
            return Response(status_code=202)  # 2026-07-28 defines no client notifications over HTTP
        if version is not None and version not in HANDSHAKE_VERSIONS:
            return _plain(400, f"Bad Request: unsupported MCP-Protocol-Version {version!r}")
        if isinstance(message, Request) and message.method == "initialize":
            return await self._initialize(message, principal)
        session = await self._lookup(request, principal, _headers(request).get("mcp-session-id"))
        if isinstance(session, Response):
            return session
        if isinstance(message, Request) and _wants_progress(message) and _accepts(request, "text/event-stream"):
            if self._task_group is None:
                return _plain(503, "Service Unavailable: shutting down")
            return self._stream(session, self._answer_events(lambda notify: self._serve_one(session, message, notify)))
        items = message.items if isinstance(message, Batch) else (message,)
        answers = await self._serve_items(session, items)
        if not answers:
            return Response(status_code=202)
        if isinstance(message, Batch):
            return Response(dumps(answers), media_type="application/json")
        return Response(dumps(answers[0]), media_type="application/json")

    async def _read_message(self, request: HttpRequest) -> Message | Batch | Response:
        """The body as JSON-RPC, or the HTTP answer refusing it (413 over the size bound, 400 unparseable)."""
        body = await _read_body(request, self._max_message_bytes)
        if body is None:
            return _plain(413, f"Payload Too Large: the limit is {self._max_message_bytes} bytes")
        try:
            return decode(body)
        except ClientError as exc:
            return JSONResponse(_error_body(exc, request_id_of(exc)), status_code=400)

    async def _initialize(self, message: Request, principal: Identity | None) -> Response:
        session = self._new_session(principal, legacy=False)
        if isinstance(session, Response):
            return session
        answers = await self._serve_items(session, (message,))
        negotiated = session.endpoint.negotiated()
        if not answers or "error" in answers[0] or negotiated is None:
            self._end(session, "initialize failed")
            return JSONResponse(answers[0] if answers else None)
        if self.sessions.pop(session.id, None) is None:  # ended while it initialized (shutting down, evicted)
            return _plain(503, "Service Unavailable: the session ended while it initialized", **{"Retry-After": "1"})
        now = time.time()
        sealed = self._ids.issue(
            protocol_version=negotiated.protocol_version,
            principal=key_of(principal),
            capabilities=negotiated.capabilities,
            client_name=negotiated.client_name,
            now=now,
        )
        session.id, session.expires = sealed, now + self._ids.ttl_s
        self.sessions[sealed] = session
        await self._share_activity(session)
        log.info("session_started", session=session.id[:8], principal=key_of(principal))
        return Response(dumps(answers[0]), media_type="application/json", headers={"Mcp-Session-Id": session.id})

    async def _serve_one(self, session: HttpSession, request: Request, notify: Notify) -> dict[str, Any]:
        admitted = session.inbound.admit(request)
        if isinstance(admitted, ErrorResponse):
            return to_wire(admitted)
        answer = await session.inbound.run(request, admitted, notify)
        if answer is None:
            answer = ErrorResponse(request.id, {"code": REQUEST_CANCELLED, "message": "Request cancelled"})
        return to_wire(answer)

    async def _answer_events(self, answer: Callable[[Notify], Awaitable[dict[str, Any]]]) -> AsyncGenerator[bytes]:
        """An SSE answer: the request's notifications as they come, then its response. The request starts
        when the stream is first read (a stream never read, its client gone, costs nothing), runs in the
        front end's task group, and is cancelled when the stream closes."""
        if self._task_group is None:
            return  # shutting down
        frames_in, frames = anyio.create_memory_object_stream[bytes](64)
        scope = anyio.CancelScope()

        async def notify(method: str, params: dict[str, Any] | None) -> None:
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.WouldBlock):
                frames_in.send_nowait(encode(Notification(method, params)))  # a slow reader loses progress, not memory

        async def serve() -> None:
            with frames_in, scope:
                final = await answer(notify)
                with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await frames_in.send(dumps(final))

        self._task_group.start_soon(serve)
        try:
            with frames:
                while True:
                    frame: bytes | None = None
                    with anyio.move_on_after(KEEPALIVE_S):  # no yield inside: the scope must not span one
                        try:
                            frame = await frames.receive()
                        except anyio.EndOfStream:
                            return
                    # quiet for a while (a listen stream): a comment keeps intermediaries from timing out
                    yield KEEPALIVE if frame is None else encode_event(frame)
        finally:
            scope.cancel()

    # ---- Streamable HTTP, 2026-07-28: one request per POST, no session --------------------------

    async def _serve_stateless(self, http: HttpRequest, request: Request, principal: Identity | None) -> Response:
        try:
            envelope = read_envelope(request.params)
            check_headers(_headers(http), request.method, request.params, envelope.version)
        except ClientError as exc:
            return _modern_answer(error_response(request.id, exc))
        streamed = request.method == "subscriptions/listen" or _wants_progress(request)
        refusal = (self._stream_share if streamed else self._request_share).refusal(principal)
        if refusal is not None:
            kind = "streams open" if streamed else "requests in flight"
            return _plain(503, f"Service Unavailable: too many {kind} ({refusal})", **{"Retry-After": "5"})
        if streamed and not _accepts(http, "text/event-stream"):
            return _plain(406, "Not Acceptable: this answer is a stream; the client must accept text/event-stream")
        if streamed and self._task_group is None:
            return _plain(503, "Service Unavailable: shutting down")
        if streamed:
            body = self._answer_events(lambda notify: self._stateless_answer(request, notify, principal))
            return _sse_response(self._counted(body, principal))
        self._request_share.acquire(principal)
        try:
            with anyio.CancelScope() as scope:
                watch = _DisconnectWatch(http, scope)
                watch_task = asyncio.get_running_loop().create_task(watch.run())
                self._watches.add(watch_task)  # held until done: the loop keeps only weak references
                watch_task.add_done_callback(self._watches.discard)
                answer = await self._stateless_answer(request, _no_notify, principal)
                watch.answered = True
                return _modern_answer(answer)
            return Response(status_code=499)  # the client went away; nobody reads this
        finally:
            self._request_share.release(principal)

    async def _counted(self, body: AsyncGenerator[bytes], principal: Identity | None) -> AsyncGenerator[bytes]:
        """A stateless stream counts towards its bound while it is being read (not before: one never
        read is never started)."""
        self._stream_share.acquire(principal)
        try:
            async for chunk in body:
                yield chunk
        finally:
            self._stream_share.release(principal)
            await body.aclose()  # its request is cancelled now, not when the generator is collected

    async def _stateless_answer(self, request: Request, notify: Notify, principal: Identity | None) -> dict[str, Any]:
        tokens = structlog.contextvars.bind_contextvars(request_id=request.id, method=request.method)
        try:
            return to_wire(await answer(request, self._stateless(request, notify, principal), log))
        finally:
            structlog.contextvars.reset_contextvars(**tokens)

    async def _serve_items(self, session: HttpSession, items: Sequence[Message | Malformed]) -> list[dict[str, Any]]:
        answers: list[dict[str, Any]] = []

        async def to_stream(method: str, params: dict[str, Any] | None) -> None:
            session.events.push(encode(Notification(method, params)))

        if len(items) == 1 and isinstance(items[0], Request):  # the usual case: no task group to run one request
            return [await self._serve_one(session, items[0], to_stream)]

        async def serve(request: Request) -> None:
            answers.append(await self._serve_one(session, request, to_stream))

        async with anyio.create_task_group() as tg:
            for item in items:
                if isinstance(item, Malformed):
                    answers.append(_error_body(item.error, item.id))
                elif isinstance(item, Request):
                    tg.start_soon(serve, item)
                elif isinstance(item, Notification):
                    if item.method == "notifications/cancelled" and not session.inbound.cancel(item.params):
                        await self._cluster.cancel(session.id, (item.params or {}).get("requestId"))
                    await session.endpoint.handle_notification(item)
                elif isinstance(item, (RpcResponse, ErrorResponse)) and not session.take_answer(item):
                    await self._answer_elsewhere(session, item)  # answering a request another replica sent
        return answers

    async def _get(self, request: HttpRequest, session: HttpSession) -> Response:
        if session.legacy:
            return _plain(400, "Bad Request: this is a legacy HTTP+SSE session")
        if not _accepts(request, "text/event-stream"):
            return _plain(406, "Not Acceptable: the client must accept text/event-stream")
        last = _headers(request).get("last-event-id")
        after = _decimal(last)
        if last is not None and after is None:
            return _plain(400, "Bad Request: Last-Event-ID must be an event id this server sent (ASCII digits)")
        if session.streams:
            return _plain(409, "Conflict: this session already has an open stream")
        if after is not None and not session.events.issued(after):
            # An event id another replica (or this one before a restart) numbered: what it sent since is
            # not here to replay. The client is told to list again unless the catalog's epoch (replicas
            # sharing Redis count changes) shows that nothing changed since that event.
            then, now = epoch_of(after), self._cluster.epoch()
            relist = then is None or now is None or now != then
            log.info("stream_resumed", session=session.id[:8], relist=relist)
            after = None
            if relist:
                session.endpoint.list_changed()
        await self._cluster.hold_stream(session.id)
        return self._stream(
            session, self._events(session, after), on_close=lambda: self._released(session), counted=True
        )

    async def _events(self, session: HttpSession, after: int | None) -> AsyncGenerator[bytes]:
        async for event in session.events.follow(after):
            yield KEEPALIVE if event is None else encode_event(event.data, event_id=event.id)

    def _stream(
        self,
        session: HttpSession,
        body: AsyncGenerator[bytes],
        *,
        on_close: Callable[[], None] | None = None,
        counted: bool = False,
    ) -> StreamingResponse:
        """``counted`` streams are the session's one standalone stream (a second one is refused)."""

        async def tracked() -> AsyncIterator[bytes]:
            session.streams += counted
            if counted:
                session.stream_opened.set()
            try:
                async for chunk in body:
                    yield chunk
            finally:
                session.streams -= counted
                session.last_seen = time.monotonic()
                if on_close is not None:
                    on_close()
                await body.aclose()

        return _sse_response(tracked(), None if session.legacy else session.id)

    # ---- legacy HTTP+SSE (2024-11-05) ---------------------------------------------------------

    async def _legacy_stream(self, request: HttpRequest) -> Response:
        principal, refusal = await self._guard.check(request)
        if refusal is not None:
            return await self._refused(request, refusal, principal)
        session = self._new_session(principal, legacy=True)
        if isinstance(session, Response):
            return session
        session.expires = time.time() + self._ids.ttl_s  # its id is not sealed, its life bounded all the same
        endpoint_url = f"{self.settings.messages_path}?session_id={session.id}"
        log.info("session_started", session=session.id[:8], principal=key_of(principal), transport="sse")
        await self._cluster.hold_stream(session.id)

        def closed() -> None:
            self._end(session, "stream closed")
            self._released(session)

        async def events() -> AsyncGenerator[bytes]:
            yield encode_event(endpoint_url.encode(), event="endpoint")
            async for chunk in self._events(session, None):
                yield chunk

        return self._stream(session, events(), on_close=closed, counted=True)

    async def _legacy_message(self, request: HttpRequest) -> Response:
        principal, refusal = await self._guard.check(request)
        if refusal is not None:
            return await self._refused(request, refusal, principal)
        session_id = request.query_params.get("session_id")
        session = await self._lookup(request, principal, session_id)
        if isinstance(session, Response):
            if session.status_code == 404 and session_id:
                return await self._forward_legacy(request, principal, session_id, session)
            return session
        if not session.legacy:
            return _plain(400, "Bad Request: not a legacy HTTP+SSE session")
        message = await self._read_message(request)
        if isinstance(message, Response):
            return message
        if self._task_group is None:
            return _plain(503, "Service Unavailable: shutting down")
        self._task_group.start_soon(self._legacy_serve, session, message)
        return Response(status_code=202)

    def _released(self, session: HttpSession) -> None:
        """A session's event stream closed here: this replica no longer holds it."""
        if self._task_group is not None and not isinstance(self._cluster, NoCluster):
            self._task_group.start_soon(self._cluster.release_stream, session.id)

    async def _forward_legacy(
        self, request: HttpRequest, principal: Identity | None, session_id: str, not_found: Response
    ) -> Response:
        """A legacy POST for a stream held by another replica: passed on to it (with Redis), else 404."""
        if isinstance(self._cluster, NoCluster):
            return not_found
        body = await _read_body(request, self._max_message_bytes)
        if body is None:
            return _plain(413, f"Payload Too Large: the limit is {self._max_message_bytes} bytes")
        if await self._cluster.forward_legacy(session_id, key_of(principal), body):
            return Response(status_code=202)
        return not_found

    async def _legacy_serve(self, session: HttpSession, message: Message | Batch) -> None:
        items = message.items if isinstance(message, Batch) else (message,)
        answers = await self._serve_items(session, items)
        if isinstance(message, Batch) and answers:
            session.events.push(dumps(answers))
        else:
            for answer in answers:
                session.events.push(dumps(answer))


def _sse_response(body: AsyncIterator[bytes], session_id: str | None = None) -> StreamingResponse:
    headers = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


def _modern_answer(answer: dict[str, Any] | ErrorResponse) -> Response:
    """A stateless answer as JSON, with the HTTP status 2026-07-28 assigns to its error code."""
    wire = to_wire(answer) if isinstance(answer, ErrorResponse) else answer
    error = wire.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    status = HTTP_STATUS_FOR_CODE.get(code, 200) if isinstance(code, int) else 200
    return Response(dumps(wire), status_code=status, media_type="application/json")


class _DisconnectWatch:
    """Closing the connection is how a 2026-07-28 client cancels. The body is read, so the next ASGI
    message is ``http.disconnect``: sent when the client goes away, or once the response has been
    sent (ASGI: ``receive`` after the response). The watch therefore ends by itself and is never
    cancelled. It runs as a plain asyncio task that the front end holds until it is done: an anyio
    task costs several times more to start, and anyio formats the cancelling task's repr on every
    cancel (together ~10% of the gateway's CPU on this path); uvicorn runs on asyncio in any case."""

    def __init__(self, http: HttpRequest, scope: anyio.CancelScope) -> None:
        self._http = http
        self._scope = scope
        self.answered = False

    async def run(self) -> None:
        while (await self._http.receive())["type"] != "http.disconnect":
            pass
        if not self.answered:
            self._scope.cancel()


async def _no_notify(method: str, params: dict[str, Any] | None) -> None:
    """A JSON answer has nowhere to put notifications (a client wanting progress gets a stream)."""


def _wants_progress(request: Request) -> bool:
    meta = (request.params or {}).get("_meta")
    return isinstance(meta, dict) and "progressToken" in meta
