"""The HTTP front end's sessions: what one is (its endpoint, its inbound requests, its event log, the
requests sent to its client), and the store that makes, finds, resumes and ends them.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import structlog
import structlog.contextvars
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream
from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from gateway.cluster.replicas import NoCluster, RedisCluster, session_key
from gateway.cluster.session_ids import Negotiated, SealedState, SessionIds
from gateway.config import ServerSettings
from gateway.frontend.http.messages import REQUEST_ID_KEY, plain, refused
from gateway.identity.fair_share import FairShare
from gateway.identity.principal import Identity, key_of
from gateway.inbound import InboundRequests, Notify
from gateway.protocol.errors import ClientError
from gateway.protocol.jsonrpc import (
    ErrorResponse,
    Notification,
    Request,
    RequestId,
    decode,
    dumps,
    encode,
    to_wire,
)
from gateway.protocol.jsonrpc import Response as RpcResponse
from gateway.protocol.lists import EVERY_LIST, Lists
from gateway.protocol.modern import Envelope
from gateway.rpc import PeerClosed, RemoteError, RequestTimeout
from gateway.transports.sse import EventLog

log = structlog.get_logger("gateway.http")


MAX_ENDED_REMEMBERED = 100_000


class Endpoint(Protocol):
    """The MCP session behind an HTTP session."""

    async def handle_request(self, request: Request, notify: Notify) -> dict[str, Any]: ...

    async def handle_notification(self, notification: Notification) -> None: ...

    def close(self) -> None: ...

    def negotiated(self) -> Negotiated | None:
        """What initialize settled (None before): sealed into the session id."""

    def resume(self, state: SealedState) -> None:
        """Become the initialized session a sealed id describes (made on another replica, or before a restart)."""

    def list_changed(self, lists: Lists = EVERY_LIST) -> None:
        """Tell the client these lists may have changed (on its event stream)."""


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


Stateless = Callable[[Request, Notify, Identity | None, Envelope], Awaitable[dict[str, Any]]]
"""``handler(request, notify, principal, envelope)`` answers one 2026-07-28 request, no session involved
(its envelope read once, by the front end)."""


class SessionStore:
    """The sessions of one front end, shared by its three paths (Streamable HTTP, its GET streams, legacy
    HTTP+SSE): made within the bounds (a global one and a share per identity, making room from the least
    recently used idle session), found by id (a sealed id of another replica or an earlier run is
    resumed), bound to the identity that made them, ended (deleted, idle, expired, evicted, shutdown)
    and remembered as ended until they would have expired. What it learns from the other replicas
    (deletes, cancels, requests for a client, answers) arrives through ``cluster``'s handlers."""

    def __init__(
        self,
        settings: ServerSettings,
        factory: EndpointFactory,
        *,
        share: int | None,
        max_in_flight: int,
        ids: SessionIds,
        cluster: NoCluster | RedisCluster,
    ) -> None:
        self.settings = settings
        self._factory = factory
        self._max_in_flight = max_in_flight
        self._session_share = FairShare(settings.max_sessions, share)
        self.ids = ids
        self.cluster = cluster
        self.sessions: dict[str, HttpSession] = {}
        self._ended: dict[str, float] = {}  # sealed ids ended here (deleted, idle), until they expire anyway
        self.task_group: TaskGroup | None = None
        cluster.handlers.deleted = self.deleted_elsewhere
        cluster.handlers.cancel = self.cancelled_elsewhere
        cluster.handlers.ask = self.asked_elsewhere
        cluster.handlers.answer = self.answered_elsewhere

    def expire_idle(self) -> None:
        """End the sessions idle here for ``session_idle_timeout_s`` (none with an open stream). Alone,
        the gateway knows a session's every request: an idle one is ended for good. With Redis, the
        replicas share when each session was last used: one still in use elsewhere only leaves this
        replica's memory, one idle everywhere is ended on every replica (see ``_end_if_idle_everywhere``)."""
        deadline = time.monotonic() - self.settings.session_idle_timeout_s
        if self.task_group is not None:
            for session in [s for s in self.sessions.values() if s.streams]:
                self.task_group.start_soon(self.share_activity, session)  # an open stream is use, however quiet
        for session in [s for s in self.sessions.values() if s.streams == 0 and s.last_seen < deadline]:
            self.end(session, "idle")
            if isinstance(self.cluster, NoCluster) and not self.ids.shared:  # alone, it knows every request
                self.remember_ended(session.id, session.expires)
            elif self.task_group is not None and session.expires is not None:
                self.task_group.start_soon(self.end_if_idle_everywhere, session.id, session.expires)

    async def end_if_idle_everywhere(self, session_id: str, expires: float) -> None:
        if await self.cluster.is_active(session_id) is False:  # None: Redis cannot say, so it stays resumable
            self.remember_ended(session_id, expires)
            await self.cluster.deleted(session_id, expires)

    def expire_lapsed(self) -> None:
        """End the sessions whose life is over (``session_ttl_s``), their open streams with them."""
        now = time.time()
        for session in [s for s in self.sessions.values() if s.expires is not None and s.expires <= now]:
            self.end(session, "expired")

    def close_all(self) -> None:
        for session in list(self.sessions.values()):
            self.end(session, "shutdown")

    def end(self, session: HttpSession, reason: str) -> None:
        if self.sessions.pop(session.id, None) is not None:
            self._session_share.release(session.principal)
            session.events.close()
            session.endpoint.close()
            log.info("session_ended", session=session.id[:8], reason=reason)

    def new_session(
        self,
        principal: Identity | None,
        *,
        legacy: bool,
        session_id: str | None = None,
        request_id: RequestId | None = None,
    ) -> HttpSession | Response:
        if self._session_share.refusal(principal) is not None:
            self.expire_idle()
        if self._session_share.refusal(principal) is not None:
            self.make_room(principal)
        refusal = self._session_share.refusal(principal)
        if refusal is not None:
            too_many = f"Service Unavailable: too many sessions ({refusal})"
            return plain(503, too_many, request_id=request_id, **{"Retry-After": "5"})
        self._session_share.acquire(principal)
        session_id = session_id or secrets.token_urlsafe(32)  # sealed once initialize has answered
        events = EventLog(max_events=1024 if legacy else 256, epoch=self.cluster.epoch)

        def push(frame: bytes, key: str | None) -> None:
            events.push(frame, key=key)

        session: HttpSession | None = None

        async def ask(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            assert session is not None  # noqa: S101 - made below, before any request is read
            return await session.ask(method, params)

        endpoint = self._factory(principal, session_id, push, ask)
        inbound = InboundRequests(endpoint.handle_request, max_in_flight=self._max_in_flight)
        relay = None if isinstance(self.cluster, NoCluster) else self.cluster
        session = HttpSession(session_id, principal, endpoint, inbound, events, legacy, relay=relay)
        self.sessions[session_id] = session
        return session

    def make_room(self, principal: Identity | None) -> None:
        """End the least recently used session without an open stream: this identity's own when it is at
        its share, else the largest holder's. A session nobody has used for longest goes first, and one
        identity's sessions never push out another's below the share."""
        share = self._session_share
        at_share = share.per_identity is not None and share.held.get(principal, 0) >= share.per_identity
        owner = principal if at_share else share.largest_holder()
        idle = [s for s in self.sessions.values() if s.principal == owner and not s.streams and not len(s.inbound)]
        if idle:
            self.end(min(idle, key=lambda s: s.last_seen), "evicted to make room (least recently used)")

    async def lookup(
        self, request: HttpRequest, principal: Identity | None, session_id: str | None
    ) -> HttpSession | Response:
        if not session_id:
            return refused(request, 400, "Bad Request: Mcp-Session-Id header is required")
        session = self.sessions.get(session_id)
        if session is None:
            resumed = await self.resume(session_id, principal, request.scope.get(REQUEST_ID_KEY))
            if isinstance(resumed, Response):
                return resumed
            session = resumed
        if session is None or session.principal != principal:
            return refused(request, 404, "Session not found")
        if session.expires is not None and session.expires <= time.time():  # session_ttl_s, wherever it is
            self.end(session, "expired")
            return refused(request, 404, "Session not found")
        session.last_seen = time.monotonic()
        await self.share_activity(session)
        return session

    async def share_activity(self, session: HttpSession) -> None:
        """Tell the other replicas (Redis) that the session is in use, at most every quarter of the idle
        time-out; the record lives a quarter longer than the time-out, so a session is idle everywhere
        once it is gone (idle at least the time-out, ended within a quarter more)."""
        idle_s = self.settings.session_idle_timeout_s
        if isinstance(self.cluster, NoCluster) or time.monotonic() - session.shared_activity < idle_s / 4:
            return
        session.shared_activity = time.monotonic()
        await self.cluster.active(session.id, idle_s * 1.25)

    async def resume(
        self, session_id: str, principal: Identity | None, request_id: RequestId | None = None
    ) -> HttpSession | Response | None:
        """The session a sealed id describes, made here (it began on another replica, or before a restart);
        None when the id does not open, belongs to someone else, or its client ended it. ``request_id``:
        the request that asks for it, should it be refused (too many sessions here)."""
        now = time.time()
        if session_id in self._ended:
            return None
        state = self.ids.open(session_id, now=now)
        if state is None or state.principal != key_of(principal):
            return None
        if await self.cluster.is_deleted(session_id):
            return None
        idle_s = self.settings.session_idle_timeout_s
        if now - state.created >= idle_s and await self.cluster.is_active(session_id) is False:
            self.remember_ended(session_id, state.expires)  # idle on every replica (their shared record lapsed)
            await self.cluster.deleted(session_id, state.expires)
            return None
        if session_id in self.sessions:  # resumed by a concurrent request meanwhile
            return self.sessions[session_id]
        session = self.new_session(principal, legacy=False, session_id=session_id, request_id=request_id)
        if isinstance(session, Response):
            return session
        session.endpoint.resume(state)
        session.expires = state.expires
        log.info("session_resumed", session=session_id[:8], principal=key_of(principal), created=state.created)
        return session

    def local(self, key: str) -> HttpSession | None:
        """A session here by the hash other replicas name it by (rare: deletes, cancels, legacy posts)."""
        return next((s for s in self.sessions.values() if session_key(s.id) == key), None)

    def deleted_elsewhere(self, key: str) -> None:
        session = self.local(key)
        if session is not None:
            self.remember_ended(session.id, session.expires)
            self.end(session, "deleted by client on another replica")

    def cancelled_elsewhere(self, key: str, request_id: Any) -> None:
        session = self.local(key)
        if session is not None:
            session.inbound.cancel({"requestId": request_id})

    def asked_elsewhere(self, key: str, frame: bytes) -> None:
        """A request for a client whose event stream is here, from an upstream on another replica."""
        session = self.local(key)
        if session is not None and session.streams:
            session.events.push(frame)

    def answered_elsewhere(self, key: str, body: bytes) -> None:
        """A client's answer, POSTed to another replica, to a request this replica sent it."""
        session = self.local(key)
        try:
            message = decode(body)
        except ClientError:
            return
        if session is not None and isinstance(message, (RpcResponse, ErrorResponse)):
            session.take_answer(message)

    async def answer_elsewhere(self, session: HttpSession, message: RpcResponse | ErrorResponse) -> None:
        """A client's answer to a request another replica sent it (the id says which): passed on."""
        parts = str(message.id).split("-", 2) if isinstance(message.id, str) else []
        if len(parts) == 3 and parts[0] == "gateway" and parts[1] != self.cluster.replica:
            await self.cluster.answer_to(parts[1], session.id, dumps(to_wire(message)))

    def remember_ended(self, session_id: str, expires: float | None) -> None:
        """An id ended here (its client deleted it, or it idled) must not be resumed here again (other
        replicas: see cluster/replicas.py). Keyed by the id's one accepted spelling (session_ids.py);
        the one writer of what is remembered, so its bound holds."""
        if expires is None:
            return
        now = time.time()
        if len(self._ended) >= MAX_ENDED_REMEMBERED:
            self._ended = {sid: until for sid, until in self._ended.items() if until > now}
            while len(self._ended) >= MAX_ENDED_REMEMBERED:
                del self._ended[next(iter(self._ended))]  # the oldest first
        self._ended[session_id] = expires
