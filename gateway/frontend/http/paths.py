"""What the HTTP paths share: refusing a request (audited), reading its body as JSON-RPC, serving
a session's messages, answering with an event stream, and holding a session's stream open.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import suppress
from typing import Any

import anyio
import structlog
import structlog.contextvars
from starlette.requests import ClientDisconnect
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse

from gateway.config import ServerSettings
from gateway.frontend.http.guard import Guard
from gateway.frontend.http.messages import (
    BODY_KEY,
    REQUEST_CANCELLED,
    REQUEST_ID_KEY,
    error_body,
    headers_of,
    read_body,
    sse_response,
    too_large,
)
from gateway.frontend.http.sessions import (
    HttpSession,
    SessionStore,
    Stateless,
)
from gateway.identity.audit import RefusedRequest
from gateway.identity.fair_share import FairShare
from gateway.identity.principal import Identity
from gateway.protocol.errors import ClientError
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
    of_notification,
    request_id_of,
    to_wire,
)
from gateway.protocol.jsonrpc import (
    Response as RpcResponse,
)
from gateway.rpc import Notify
from gateway.transports.sse import KEEPALIVE, KEEPALIVE_S, encode_event

log = structlog.get_logger("gateway.http")


class HttpPaths:
    """The state every path reads (the front end holds it) and the steps they share."""

    store: SessionStore
    settings: ServerSettings
    _stateless: Stateless
    _request_share: FairShare
    _stream_share: FairShare
    _watches: set[asyncio.Task[None]]
    _max_message_bytes: int
    _guard: Guard
    _on_refused: Callable[[RefusedRequest], None] | None

    async def _refused(self, request: HttpRequest, refusal: Response, identity: Identity | None) -> Response:
        """A request refused before it was served (Host, Origin, credentials, scope): audited with who it
        came from where that is known, and what it asked (its body, read within the message bound; else
        its ``Mcp-Method``/``Mcp-Name`` headers), then answered."""
        if self._on_refused is not None:
            try:
                reason = str(json.loads(bytes(refusal.body))["error"]["message"])
            except (ValueError, KeyError, TypeError):
                reason = "refused"
            headers = headers_of(request)
            body = request.scope.get(BODY_KEY)
            if body is None and request.method == "POST":
                with suppress(ClientDisconnect):
                    body = await read_body(request, self._max_message_bytes)
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

    async def _read_message(self, request: HttpRequest) -> Message | Batch | Response:
        """The body as JSON-RPC, or the HTTP answer refusing it (413 over the size bound, 400 unparseable).
        A 413 leaves the rest of the body unread: the connection closes after it (lingering, so that a
        client still sending reads it) rather than read it all to keep the connection."""
        head = bytearray()
        body = await read_body(request, self._max_message_bytes, head)
        if body is None:
            return too_large(self._max_message_bytes, bytes(head))
        request.scope[BODY_KEY] = body
        try:
            message = decode(body)
        except ClientError as exc:
            return JSONResponse(error_body(exc, request_id_of(exc)), status_code=400)
        if isinstance(message, Request):  # (what a stop that cuts it short answers under: server.py)
            request.scope[REQUEST_ID_KEY] = message.id
        return message

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
        if self.store.task_group is None:
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

        self.store.task_group.start_soon(serve)
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
                    if not of_notification(item.error):  # (a notification is never answered)
                        answers.append(error_body(item.error, item.id))
                elif isinstance(item, Request):
                    tg.start_soon(serve, item)
                elif isinstance(item, Notification):
                    if item.method == "notifications/cancelled" and not session.inbound.cancel(item.params):
                        await self.store.cluster.cancel(session.id, (item.params or {}).get("requestId"))
                    await session.endpoint.handle_notification(item)
                elif isinstance(item, (RpcResponse, ErrorResponse)) and not session.take_answer(item):
                    await self.store.answer_elsewhere(session, item)  # answering a request another replica sent
        return answers

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

        return sse_response(tracked(), None if session.legacy else session.id)
