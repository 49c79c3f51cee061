"""Streamable HTTP in the 2026-07-28 era: a request and its answer in one POST, no session. What HTTP adds
(headers mirroring the body) is checked, the answer's status follows its error code, and closing the
response stream cancels the request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import structlog
from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from gateway.frontend.http.messages import (
    DisconnectWatch,
    accepts,
    headers_of,
    modern_answer,
    no_notify,
    refused,
    sse_response,
    wants_progress,
)
from gateway.frontend.http.paths import HttpPaths
from gateway.identity.principal import Identity
from gateway.inbound import Notify, answer
from gateway.observability.logs import bind_request, unbind_request
from gateway.protocol.errors import ClientError
from gateway.protocol.jsonrpc import (
    Request,
    error_response,
    to_wire,
)
from gateway.protocol.modern import Envelope, check_headers, read_envelope

log = structlog.get_logger("gateway.http")


class StatelessPath(HttpPaths):
    """Streamable HTTP in the 2026-07-28 era: one request per POST, no session; its own share of the
    bounds for plain requests and for streams (listen, progress), per identity."""

    async def _serve_stateless(self, http: HttpRequest, request: Request, principal: Identity | None) -> Response:
        try:
            envelope = read_envelope(request.params)
            check_headers(headers_of(http), request.method, request.params, envelope.version)
        except ClientError as exc:
            return modern_answer(error_response(request.id, exc))
        streamed = request.method == "subscriptions/listen" or wants_progress(request)
        refusal = (self._stream_share if streamed else self._request_share).refusal(principal)
        if refusal is not None:
            kind = "streams open" if streamed else "requests in flight"
            return refused(http, 503, f"Service Unavailable: too many {kind} ({refusal})", **{"Retry-After": "5"})
        if streamed and not accepts(http, "text/event-stream"):
            return refused(
                http, 406, "Not Acceptable: this answer is a stream; the client must accept text/event-stream"
            )
        if streamed and self.store.task_group is None:
            return refused(http, 503, "Service Unavailable: shutting down")
        if streamed:
            return await self._streamed(http, request, principal, envelope)
        self._request_share.acquire(principal)
        try:
            watch = DisconnectWatch(http)
            watch.start(self._watches)
            try:
                answer = await self._stateless_answer(request, no_notify, principal, envelope)
            except asyncio.CancelledError:
                if watch.cancelled():
                    return Response(status_code=499)  # the client went away; nobody reads this
                raise
            finally:
                watch.stop()
            return modern_answer(answer)
        finally:
            self._request_share.release(principal)

    async def _streamed(
        self, http: HttpRequest, request: Request, principal: Identity | None, envelope: Envelope
    ) -> Response:
        """A request answered as a stream (a listen, or one asking for progress) once it has something to
        stream: what it is told before any notification (a refusal, an unknown method, invalid params, or
        a quick answer) is answered as JSON with the status its code calls for, not inside a 200 stream."""
        told = False
        answers: list[dict[str, Any]] = []

        async def run(notify: Notify) -> dict[str, Any]:
            async def noting(method: str, params: dict[str, Any] | None) -> None:
                nonlocal told
                told = True
                await notify(method, params)

            answers.append(await self._stateless_answer(request, noting, principal, envelope))
            return answers[-1]

        body = self._counted(self._answer_events(run), principal)
        watch = DisconnectWatch(http)
        watch.start(self._watches)
        try:
            first = await anext(body, None)
        except asyncio.CancelledError:
            await body.aclose()
            if watch.cancelled():
                return Response(status_code=499)  # the client went away; nobody reads this
            raise
        finally:
            watch.stop()
        if first is None:
            return refused(http, 503, "Service Unavailable: shutting down")
        if answers and not told:  # the first frame is the answer itself
            await body.aclose()
            return modern_answer(answers[0])
        return sse_response(_after(first, body))

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

    async def _stateless_answer(
        self, request: Request, notify: Notify, principal: Identity | None, envelope: Envelope
    ) -> dict[str, Any]:
        bound = bind_request(request.id, request.method)
        try:
            return to_wire(await answer(request, self._stateless(request, notify, principal, envelope), log))
        finally:
            unbind_request(bound)


async def _after(first: bytes, rest: AsyncGenerator[bytes]) -> AsyncGenerator[bytes]:
    """A stream whose first chunk has been read already."""
    try:
        yield first
        async for chunk in rest:
            yield chunk
    finally:
        await rest.aclose()
