"""What the HTTP paths share to read a request and write an answer: headers decoded once, bodies read within
a bound, plain JSON-RPC refusals, event-stream responses, and the watch that cancels a request whose
client went away. HTTP only: nothing here knows about sessions or prompts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from functools import lru_cache
from typing import Any

import anyio
import structlog
import structlog.contextvars
from starlette.requests import ClientDisconnect
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse

from gateway.frontend.http.connection_guard import CONNECTION
from gateway.identity.rate_limits import retry_after_header
from gateway.protocol.errors import GatewayError
from gateway.protocol.jsonrpc import (
    ErrorResponse,
    Request,
    RequestId,
    dumps,
    error_response,
    id_at_edges,
    to_wire,
)
from gateway.protocol.modern import HTTP_STATUS_FOR_CODE
from gateway.transports.base import EDGE_BYTES

log = structlog.get_logger("gateway.http")


REQUEST_CANCELLED = -32800


def error_body(error: GatewayError, request_id: Any = None) -> dict[str, Any]:
    return to_wire(error_response(request_id, error))


def plain(status: int, message: str, *, request_id: RequestId | None = None, **headers: str) -> JSONResponse:
    """An HTTP-level refusal with a JSON-RPC error body, under the request's id where it is known (else
    none, as the spec permits)."""
    code = -32600 if status < 500 else -32603
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def refused(http: HttpRequest, status: int, message: str, **headers: str) -> JSONResponse:
    """``plain`` under the id of the request the body held, once it was read (``REQUEST_ID_KEY``)."""
    return plain(status, message, request_id=http.scope.get(REQUEST_ID_KEY), **headers)


HEAD_WAIT_S = 0.05
"""How long a 413 waits for a body's first bytes to answer under its id (they usually came with the head)."""


def too_large(limit: int, head: bytes) -> JSONResponse:
    """413 for a body over ``limit``, answered under its id where its first bytes hold it (as the SDKs
    write a request: ``{"jsonrpc":"2.0","id":42,...``); the connection closes after it."""
    found = id_at_edges(head, b"")
    request_id = found[0] if found is not None and found[1] == "request" else None
    return plain(413, f"Payload Too Large: the limit is {limit} bytes", request_id=request_id, Connection="close")


_HEADERS_KEY = "gateway.headers"
REQUEST_ID_KEY = "gateway.request_id"
"""The ASGI scope's note of the id of the request its body holds, once read."""

BODY_KEY = "gateway.body"
"""The ASGI scope's note of the body, once read (it is read from ``receive`` once: a refusal after it,
audited, reads what it asked from here)."""


def headers_of(request: HttpRequest) -> dict[str, str]:
    """The request's headers decoded once into a dict, kept in its ASGI scope (Starlette's lookups scan
    and decode the whole list each time, and a request asks for up to ten). ASGI names are lower-case;
    of repeated headers the first wins, as with Starlette."""
    decoded: dict[str, str] | None = request.scope.get(_HEADERS_KEY)
    if decoded is None:
        raw = request.scope["headers"]  # (ASGI allows any iterable; servers give a list)
        pairs = raw if isinstance(raw, (list, tuple)) else list(raw)
        # reversed: of repeated names the first is written last, and wins
        decoded = {name.decode("latin-1"): value.decode("latin-1") for name, value in reversed(pairs)}
        request.scope[_HEADERS_KEY] = decoded
    return decoded


_MAX_DECIMAL_DIGITS = 18  # below 2**63: every number a client sends here fits, and none costs a big-int parse


def bearer_token(authorization: str | None) -> str:
    """The token an ``Authorization: Bearer`` header presents ("" when it presents none)."""
    scheme, _, presented = (authorization or "").partition(" ")
    return presented.strip() if scheme.lower() == "bearer" else ""


def decimal_header(value: str | None) -> int | None:
    """A header's non-negative decimal integer, ASCII digits only (``str.isdigit`` also admits ``²`` and
    ``٣``, which ``int`` refuses or reads); None for anything else, or more than 18 digits."""
    if value is None or not (0 < len(value) <= _MAX_DECIMAL_DIGITS) or not value.isascii() or not value.isdigit():
        return None
    return int(value)


def accepts(request: HttpRequest, media_type: str) -> bool:
    accept = headers_of(request).get("accept")
    if accept is None:
        return True
    return (_admits if len(accept) > _KEPT_ACCEPT_CHARS else _admits_kept)(accept, media_type)


def _admits(accept: str, media_type: str) -> bool:
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(kinds & {media_type, "*/*", media_type.split("/")[0] + "/*"})


_KEPT_ACCEPT_CHARS = 512
_admits_kept = lru_cache(maxsize=256)(_admits)
"""The answers for short ``Accept`` values are kept (bounded in number and size: the values come from
clients): a client sends the same one with every request, and a request asks once or twice."""


async def read_body(request: HttpRequest, limit: int, head: bytearray | None = None) -> bytes | None:
    """The body, or None once it exceeds ``limit`` (read no further: memory stays bounded), its first
    ``EDGE_BYTES`` then put in ``head`` where one is given (one read more at most). Read from ASGI
    ``receive`` directly: Starlette's stream generator costs more than the copy."""
    headers = headers_of(request)
    declared = headers.get("content-length")
    if declared is not None and (decimal_header(declared) or 0) > limit:
        # Its first bytes, where they came with the head (as they do): never asked for (a client waiting
        # for "100 Continue" would be told to send it all) nor waited for (one sending nothing would hold
        # the 413 until its body's time-out).
        if head is not None and "100-continue" not in headers.get("expect", "").lower():
            with anyio.move_on_after(HEAD_WAIT_S):
                message = await request.receive()
                head += message.get("body", b"")[:EDGE_BYTES] if message["type"] == "http.request" else b""
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
            if head is not None:
                for read in chunks:
                    head += read[: EDGE_BYTES - len(head)]
            return None
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def sse_response(body: AsyncIterator[bytes], session_id: str | None = None) -> StreamingResponse:
    headers = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
    return StreamingResponse(body, media_type="text/event-stream", headers=headers)


class JsonAnswer(Response):
    """A JSON-RPC answer's bytes as an ``application/json`` response, its header list made directly:
    Starlette's ``Response`` works it out from the media type and a header mapping on every answer
    (it was a tenth of the stateless path's own work). Sent as any Starlette response is; ``headers``
    are those besides the two it writes itself."""

    media_type = "application/json"

    def __init__(self, body: bytes, status_code: int = 200, headers: Mapping[str, str] | None = None) -> None:
        self.status_code = status_code
        self.body = body
        self.background = None
        self.raw_headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
        if headers:
            self.raw_headers += [
                (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
            ]


def modern_answer(answer: dict[str, Any] | ErrorResponse) -> Response:
    """A stateless answer as JSON, with the HTTP status 2026-07-28 assigns to its error code."""
    wire = to_wire(answer) if isinstance(answer, ErrorResponse) else answer
    error = wire.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    status = HTTP_STATUS_FOR_CODE.get(code, 200) if isinstance(code, int) else 200
    headers: dict[str, str] = {}
    if status == 429:  # over a rate: when to come back, as HTTP says it too
        data = error.get("data") if isinstance(error, dict) else None
        retry_ms = data.get("retryAfterMs") if isinstance(data, dict) else None
        headers["Retry-After"] = retry_after_header(retry_ms / 1000 if isinstance(retry_ms, int) else 1)
    return JsonAnswer(dumps(wire), status, headers)


class DisconnectWatch:
    """Closing the connection is how a 2026-07-28 client cancels. The watch cancels the request's task
    itself (asyncio's cancellation, which anyio's scopes below pass on), not an anyio cancel scope around
    the request: that scope cost more than the rest of the watch; :meth:`cancelled` tells the request's
    own cancellation from any other (the server's shutdown).

    Where the connection guard handed the request to the server (always, when the gateway serves), the
    guard tells the watch when the client is gone: nothing waits per request. Elsewhere the watch is a
    plain asyncio task reading the ASGI ``receive`` (the body is read, so the next message is
    ``http.disconnect``: sent when the client goes away, or once the response has been sent), held by
    the front end until it is done (an anyio task costs several times more to start)."""

    __slots__ = ("_cancelled", "_connection", "_http", "_task", "answered")

    def __init__(self, http: HttpRequest) -> None:
        self._http = http
        self._task = asyncio.current_task()
        self._cancelled = False
        self._connection = CONNECTION.get()
        self.answered = False

    def start(self, tasks: set[asyncio.Task[None]]) -> None:
        """Watch from now on; a watch that needs a task of its own is held in ``tasks`` until it ends."""
        if self._connection is not None:
            self._connection.on_lost(self._client_gone)
            return
        task = asyncio.get_running_loop().create_task(self._read_until_disconnect())
        tasks.add(task)  # held until done: the loop keeps only weak references
        task.add_done_callback(tasks.discard)

    def stop(self) -> None:
        """The request has its answer: the client's going no longer cancels it."""
        self.answered = True
        if self._connection is not None:
            self._connection.forget(self._client_gone)

    async def _read_until_disconnect(self) -> None:
        while (await self._http.receive())["type"] != "http.disconnect":
            pass
        self._client_gone()

    def _client_gone(self) -> None:
        if not self.answered and self._task is not None:
            self._cancelled = True
            self._task.cancel()

    def cancelled(self) -> bool:
        """Whether the watch cancelled the request, and that is the only cancellation its task has:
        then the request ends with it (its task is uncancelled); any other goes on."""
        if not self._cancelled or self._task is None:
            return False
        return self._task.uncancel() == 0


async def no_notify(method: str, params: dict[str, Any] | None) -> None:
    """A JSON answer has nowhere to put notifications (a client wanting progress gets a stream)."""


def wants_progress(request: Request) -> bool:
    meta = (request.params or {}).get("_meta")
    return isinstance(meta, dict) and "progressToken" in meta
