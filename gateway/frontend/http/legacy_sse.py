"""The legacy HTTP+SSE transport (2024-11-05) at ``sse_path`` + ``messages_path``."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator

import structlog
import structlog.contextvars
from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from gateway.cluster.replicas import NoCluster
from gateway.frontend.http.credentials_expiry import until_credentials_expire
from gateway.frontend.http.messages import (
    BODY_KEY,
    plain,
    read_body,
    refused,
    too_large,
)
from gateway.frontend.http.paths import HttpPaths
from gateway.frontend.http.sessions import (
    HttpSession,
)
from gateway.identity.principal import Identity, key_of
from gateway.protocol.errors import ClientError
from gateway.protocol.jsonrpc import (
    Batch,
    Message,
    decode,
    dumps,
)
from gateway.protocol.modern import in_batch
from gateway.transports.sse import encode_event

log = structlog.get_logger("gateway.http")


class LegacySsePath(HttpPaths):
    """The legacy HTTP+SSE transport (2024-11-05): a GET stream whose first event names where to POST,
    and those POSTs, answered on the stream; with Redis, a POST reaching another replica is passed on."""

    async def _legacy_stream(self, request: HttpRequest) -> Response:
        principal, refusal = await self._guard.check(request)
        if refusal is not None:
            return await self._refused(request, refusal, principal)
        session = self.store.new_session(principal, legacy=True)
        if isinstance(session, Response):
            return session
        session.expires = time.time() + self.store.ids.ttl_s  # its id is not sealed, its life bounded all the same
        endpoint_url = f"{self.settings.messages_path}?session_id={session.id}"
        log.info("session_started", session=session.id[:8], principal=key_of(principal), transport="sse")
        await self.store.cluster.hold_stream(session.id)

        def closed() -> None:
            self.store.end(session, "stream closed")
            self._released(session)

        async def events() -> AsyncGenerator[bytes]:
            yield encode_event(endpoint_url.encode(), event="endpoint")
            async for chunk in self._events(session, None):
                yield chunk

        return self._stream(session, until_credentials_expire(events(), principal), on_close=closed, counted=True)

    async def _legacy_message(self, request: HttpRequest) -> Response:
        principal, refusal = await self._guard.check(request)
        if refusal is not None:
            return await self._refused(request, refusal, principal)
        session_id = request.query_params.get("session_id")
        session = await self.store.lookup(request, principal, session_id)
        if isinstance(session, Response):  # audited as a refusal, unless another replica holds its stream
            if session.status_code == 404 and session_id:
                forwarded = await self._forward_legacy(request, principal, session_id, session)
                if forwarded is not session:
                    return forwarded
            return await self._refused(request, session, principal)
        if not session.legacy:
            return plain(400, "Bad Request: not a legacy HTTP+SSE session")
        message = await self._read_message(request)
        if isinstance(message, Response):
            return message
        if self.store.task_group is None:
            return refused(request, 503, "Service Unavailable: shutting down")
        self.store.task_group.start_soon(self._legacy_serve, session, message)
        return Response(status_code=202)

    def _released(self, session: HttpSession) -> None:
        """A session's event stream closed here: this replica no longer holds it."""
        if self.store.task_group is not None and not isinstance(self.store.cluster, NoCluster):
            self.store.task_group.start_soon(self.store.cluster.release_stream, session.id)

    async def _forward_legacy(
        self, request: HttpRequest, principal: Identity | None, session_id: str, not_found: Response
    ) -> Response:
        """A legacy POST for a stream held by another replica: passed on to it (with Redis), else 404."""
        if isinstance(self.store.cluster, NoCluster):
            return not_found
        head = bytearray()
        body = await read_body(request, self._max_message_bytes, head)
        if body is None:
            return too_large(self._max_message_bytes, bytes(head))
        request.scope[BODY_KEY] = body  # (read once: the refusal's audit reads it here)
        if await self.store.cluster.forward_legacy(session_id, key_of(principal), body):
            return Response(status_code=202)
        return not_found

    async def _legacy_serve(self, session: HttpSession, message: Message | Batch) -> None:
        items = in_batch(message).items if isinstance(message, Batch) else (message,)
        answers = await self._serve_items(session, items)
        if isinstance(message, Batch) and answers:
            session.events.push(dumps(answers))
        else:
            for answer in answers:
                session.events.push(dumps(answer))

    def _posted_elsewhere(self, key: str, principal: str | None, body: bytes) -> bool:
        """A legacy POST another replica received for a stream held here (``principal``: its identity's key)."""
        session = self.store.local(key)
        if (
            session is None
            or not session.legacy
            or key_of(session.principal) != principal
            or self.store.task_group is None
        ):
            return False
        try:
            message = decode(body)
        except ClientError:
            return False
        self.store.task_group.start_soon(self._legacy_serve, session, message)
        return True
