"""A peer's incoming requests: admitted within a bound, answered (every failure an error answer), and
cancelled by id. Shared by the stream peer (``gateway/rpc.py``) and the HTTP front end.

A request is cancelled with asyncio's own cancellation of the task that runs it, not an anyio cancel
scope around it: the scope cost ~0.04 M instructions on every request (docs/performance.md), and
asyncio's cancellation passes through anyio's scopes below unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from gateway.observability.logs import bind_request, unbind_request
from gateway.protocol.errors import INTERNAL_ERROR, GatewayError, InvalidParams, InvalidRequest
from gateway.protocol.jsonrpc import ErrorResponse, Request, RequestId, Response, error_response, meta_problem

log = structlog.get_logger("gateway.rpc")

Notify = Callable[[str, dict[str, Any] | None], Awaitable[None]]
"""Send a notification to the peer that made a request (progress, for one)."""

RequestHandler = Callable[[Request, Notify], Awaitable[dict[str, Any]]]


async def answer(request: Request, result: Awaitable[dict[str, Any]], logger: Any) -> Response | ErrorResponse:
    """The answer to a request once ``result`` is awaited: a gateway error becomes its JSON-RPC error, and
    anything unexpected is logged and answered as an internal error that reveals nothing."""
    try:
        return Response(request.id, await result)
    except GatewayError as exc:
        return error_response(request.id, exc)
    except Exception:
        logger.exception("request_handler_failed", method=request.method)
        return ErrorResponse(request.id, {"code": INTERNAL_ERROR, "message": "Internal error"})


class Admitted:
    """An admitted request's cancellation: of the task while it runs, and a request cancelled before it
    runs ends as it starts. Once it has run, a late cancellation reaches nothing."""

    __slots__ = ("_task", "cancelled")

    def __init__(self) -> None:
        self._task: asyncio.Task[Any] | None = None
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        if self._task is not None:
            self._task.cancel()


class InboundRequests:
    """A peer's incoming requests: bounded in number, cancellable by id, every failure an error answer.
    Shared by the stream peer and the HTTP front end, which answers each request on its own HTTP
    response but must honour ``notifications/cancelled`` and the same bound all the same."""

    def __init__(self, handler: RequestHandler, *, max_in_flight: int, logger: Any = None) -> None:
        self._handler = handler
        self._max_in_flight = max_in_flight
        self._log = logger if logger is not None else log
        self._admitted: dict[RequestId, Admitted] = {}

    def admit(self, request: Request) -> Admitted | ErrorResponse:
        """Reserve the request's id, or the error answer when it cannot run (too many, or a duplicate id)."""
        if request.id in self._admitted:
            return error_response(request.id, InvalidRequest("Invalid Request: duplicate request id"))
        problem = meta_problem(request.params)
        if problem is not None:
            return error_response(request.id, InvalidParams(problem))
        if len(self._admitted) >= self._max_in_flight:
            return error_response(request.id, InvalidRequest("Invalid Request: too many concurrent requests"))
        admitted = self._admitted[request.id] = Admitted()
        return admitted

    async def run(self, request: Request, admitted: Admitted, notify: Notify) -> Response | ErrorResponse | None:
        """The answer to an admitted request; None when the peer cancelled it (it expects no answer)."""
        bound = bind_request(request.id, request.method)
        try:
            if admitted.cancelled:
                return None
            admitted._task = task = asyncio.current_task()
            try:
                return await self._answer(request, notify)
            except asyncio.CancelledError:
                # this request's cancellation, and no other (the peer's end, a shutdown) besides: it ends here
                if admitted.cancelled and task is not None and task.uncancel() == 0:
                    return None
                raise
        finally:
            admitted._task = None
            unbind_request(bound)
            self._admitted.pop(request.id, None)

    async def _answer(self, request: Request, notify: Notify) -> Response | ErrorResponse:
        return await answer(request, self._handler(request, notify), self._log)

    def cancel(self, params: dict[str, Any] | None) -> bool:
        """Apply a ``notifications/cancelled``; unknown or finished ids are ignored, as the spec asks.
        Whether a request here was cancelled."""
        request_id = (params or {}).get("requestId")
        if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
            admitted = self._admitted.get(request_id)
            if admitted is not None:
                admitted.cancel()
                return True
        return False

    def __len__(self) -> int:
        return len(self._admitted)
