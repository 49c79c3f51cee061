"""One JSON-RPC peer over a frame stream, used on both sides of the gateway.

It correlates ids, runs incoming requests concurrently (bounded), honours and sends
``notifications/cancelled``, and fails every pending request at once when the stream ends, so a caller
never waits for a timeout on a peer that is already gone. What the messages mean is the caller's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

import anyio
import structlog
import structlog.contextvars
from anyio.abc import TaskGroup

from gateway.deadlines import Deadlines
from gateway.inbound import Admitted, InboundRequests, RequestHandler
from gateway.inbound import Notify as Notify
from gateway.protocol.errors import INTERNAL_ERROR, GatewayError, InvalidRequest, MethodNotFound, ParseError
from gateway.protocol.jsonrpc import (
    Batch,
    ErrorResponse,
    Malformed,
    Message,
    Notification,
    Request,
    RequestId,
    Response,
    UnusableResponse,
    decode,
    dumps,
    encode,
    error_response,
    id_at_edges,
    of_notification,
    request_id_of,
    to_wire,
)
from gateway.protocol.modern import in_batch
from gateway.transports.base import EDGE_BYTES, ExchangingStream, MessageStream, MessageTooLarge

NotificationHandler = Callable[[Notification], Awaitable[None]]

log = structlog.get_logger("gateway.rpc")


class RemoteError(Exception):
    """The peer answered our request with a JSON-RPC error object."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message")))
        self.error = error


class UnusableAnswer(RemoteError):
    """The peer answered, but with a value that cannot be relayed (a lone surrogate, a non-finite
    number). A RemoteError, so every caller that survives a peer's error survives this one; callers
    that relay errors catch it first, to blame the peer rather than pass its words on."""

    def __init__(self, problem: str) -> None:
        super().__init__({"code": INTERNAL_ERROR, "message": f"unusable answer: {problem}"})
        self.problem = problem


class PeerClosed(Exception):
    """The stream ended (or was closed) before an answer came."""


class RequestTimeout(Exception):
    pass


class _Pending:
    """A request waiting for its outcome. The future is made only when someone has to wait: an answer
    taken in the call that sent the request (HTTP) never needs one. An asyncio future, not an anyio
    event: the peer runs on asyncio, and the event's backend lookup cost more than the rest of this."""

    __slots__ = ("_settled", "outcome")

    def __init__(self) -> None:
        self._settled: asyncio.Future[None] | None = None
        self.outcome: Response | ErrorResponse | UnusableResponse | PeerClosed | None = None

    def settle(self, outcome: Response | ErrorResponse | UnusableResponse | PeerClosed) -> None:
        self.outcome = outcome
        if self._settled is not None and not self._settled.done():
            self._settled.set_result(None)

    async def wait(self) -> None:
        if self.outcome is None:
            self._settled = asyncio.get_running_loop().create_future()
            await self._settled


async def _no_requests(request: Request, notify: Notify) -> dict[str, Any]:
    raise MethodNotFound(f"Method not found: {request.method}")


async def _ignore(notification: Notification) -> None:
    return None


class RpcPeer:
    def __init__(
        self,
        stream: MessageStream,
        *,
        on_request: RequestHandler = _no_requests,
        on_notification: NotificationHandler = _ignore,
        answer_malformed: bool = False,
        max_in_flight: int = 256,
        logger: Any = None,
    ) -> None:
        self._stream = stream
        self._exchanging = stream if isinstance(stream, ExchangingStream) else None
        self._on_notification = on_notification
        self._answer_malformed = answer_malformed
        self._log = logger if logger is not None else log
        self._inbound = InboundRequests(on_request, max_in_flight=max_in_flight, logger=self._log)
        self._receive_scope = anyio.CancelScope()
        self._handling = 0  # requests whose answer is not yet written
        self._all_answered: anyio.Event | None = None  # made only while a drain waits for it
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, _Pending] = {}
        self._closed = False
        self._closed_event = anyio.Event()
        self._task_group: TaskGroup | None = None
        self._deadlines = Deadlines()
        self._handlers: set[asyncio.Task[None]] = set()  # held until done: the loop keeps weak references

    @property
    def closed(self) -> bool:
        return self._closed

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    # ---- outgoing ------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float | None,
        on_sent: Callable[[RequestId], None] | None = None,
    ) -> dict[str, Any]:
        """Send a request and wait for its result; RemoteError, PeerClosed or RequestTimeout otherwise.
        ``on_sent`` is told the id it goes out with (its trace span records it)."""
        if self._closed:
            raise PeerClosed
        request_id = next(self._ids)
        if on_sent is not None:
            on_sent(request_id)
        pending = _Pending()
        self._pending[request_id] = pending
        # one timer for all of the peer's deadlines (gateway/deadlines.py): asyncio.timeout's own timer
        # and bookkeeping cost more than the rest of this on every request
        deadline = self._deadlines.add(request_id, timeout) if timeout is not None else None
        timed_out = False
        try:
            request = Request(request_id, method, params)
            answer = await self._transmit(encode(request), request)
            if answer is not None:
                await self._take(answer, answering=request_id)  # not JSON-RPC: failed now, not at timeout
            await pending.wait()
        except anyio.get_cancelled_exc_class():
            if timeout is not None:
                self._deadlines.remove(request_id, timeout)  # before anything more is awaited
            if deadline is not None and deadline.expired():
                timed_out = True
            else:
                with anyio.CancelScope(shield=True):
                    await self._cancel_remote(request_id, "cancelled by the caller")
                raise
        finally:
            self._pending.pop(request_id, None)
            if timeout is not None:
                self._deadlines.remove(request_id, timeout)
        if timed_out:
            await self._cancel_remote(request_id, "timed out")
            raise RequestTimeout
        outcome = pending.outcome
        if isinstance(outcome, Response):
            return outcome.result
        if isinstance(outcome, ErrorResponse):
            raise RemoteError(outcome.error)
        if isinstance(outcome, UnusableResponse):
            raise UnusableAnswer(outcome.problem)
        raise PeerClosed

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._send(Notification(method, params))

    async def _cancel_remote(self, request_id: RequestId, reason: str) -> None:
        if not self._closed:
            with contextlib.suppress(PeerClosed):
                await self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})

    async def _send(self, message: Message) -> None:
        await self._transmit(encode(message))

    async def _transmit(self, frame: bytes, request: Request | None = None) -> bytes | None:
        """Send a frame; a request on a stream that can answer in the same call (HTTP) is exchanged,
        and its answer returned. A stream that fails closes the peer."""
        if self._closed:
            raise PeerClosed
        try:
            if request is not None and self._exchanging is not None:
                return await self._exchanging.exchange(frame, request.id, request.method, request.params)
            await self._stream.send(frame)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self._close()
            raise PeerClosed from exc
        return None

    # ---- incoming ------------------------------------------------------------------------------

    async def run(self, *, drain_s: float = 0.0) -> None:
        """Serve the stream until it ends or ``stop_receiving()``; requests already running then get up to
        ``drain_s`` to answer. After that, every pending outgoing request fails with PeerClosed."""
        try:
            async with anyio.create_task_group() as tg:
                self._task_group = tg
                try:
                    with self._receive_scope:
                        await self._receive_loop()
                    with anyio.move_on_after(drain_s):
                        await self._wait_all_answered()
                finally:
                    self._close()
                    tg.cancel_scope.cancel()
                    await self._stop_handlers()
        finally:
            self._task_group = None

    def stop_receiving(self) -> None:
        """Take no new messages; requests in flight go on (graceful shutdown)."""
        self._receive_scope.cancel()

    async def _receive_loop(self) -> None:
        while True:
            try:
                frame = await self._stream.receive()
            except anyio.EndOfStream:
                return
            except MessageTooLarge as exc:
                self._log.warning("message_too_large", limit=exc.limit)
                request_id, kind = id_at_edges(exc.head, exc.tail) or (None, "unknown")
                pending = self._pending.get(request_id) if request_id is not None and kind == "response" else None
                if request_id is not None and pending is not None:  # our request's answer: it fails now
                    too_large = f"its answer is over the size limit ({exc.limit} bytes)"  # (not at its time-out)
                    pending.settle(UnusableResponse(request_id, too_large))
                else:  # answered as any bad message is: by its id when it is a request of the peer's
                    answering = request_id if kind == "request" else None
                    await self._answer_error(answering, InvalidRequest(f"Invalid Request: {exc}"))
                continue
            await self._take(frame)

    async def _take(self, frame: bytes, *, answering: RequestId | None = None) -> None:
        try:
            message = decode(frame)
        except GatewayError as exc:
            self._log.warning("malformed_message", error=exc.message, size=len(frame))
            request_id = request_id_of(exc)
            if answering is None and isinstance(exc, ParseError):  # unreadable (nested past any parser's depth):
                found = id_at_edges(frame[:EDGE_BYTES], frame[-EDGE_BYTES:])  # by its id, our request fails now
                if found is not None:  # (not at its time-out), and the peer's is answered under its own
                    answering, request_id = (found[0], None) if found[1] == "response" else (None, found[0])
            if answering is not None and (pending := self._pending.get(answering)) is not None:
                pending.settle(UnusableResponse(answering, f"its answer is not JSON-RPC ({exc.message})"))
            elif not of_notification(exc):
                await self._answer_error(request_id, exc)
            return
        if isinstance(message, Batch):
            await self._dispatch_batch(message)
        else:
            await self._dispatch(message)

    async def _answer_error(self, request_id: RequestId | None, error: GatewayError) -> None:
        if self._answer_malformed:
            with contextlib.suppress(PeerClosed):
                await self._send(error_response(request_id, error))

    async def _dispatch(self, message: Message) -> None:
        if isinstance(message, (Response, ErrorResponse, UnusableResponse)):
            pending = self._pending.get(message.id) if message.id is not None else None
            if pending is None:
                self._log.warning("response_for_unknown_id", id=message.id)
                return
            pending.settle(message)
        elif isinstance(message, Notification):
            if message.method == "notifications/cancelled":
                self._inbound.cancel(message.params)
            await self._on_notification(message)
        else:
            await self._start_handler(message)

    async def _dispatch_batch(self, batch: Batch) -> None:
        """Batches (2025-03-26 only) are answered as one array once all their requests are done."""
        if not self._answer_malformed:
            self._log.warning("batch_from_peer_ignored", size=len(batch.items))
            return
        assert self._task_group is not None  # noqa: S101 - run() sets it before the loop starts
        self._begin_handling()
        self._task_group.start_soon(self._serve_batch, in_batch(batch))

    async def _wait_all_answered(self) -> None:
        if self._handling:
            self._all_answered = anyio.Event()
            await self._all_answered.wait()

    def _begin_handling(self) -> None:
        """One more request (or batch) whose answer ``run()`` waits for when draining."""
        self._handling += 1

    def _end_handling(self) -> None:
        self._handling -= 1
        if not self._handling and self._all_answered is not None:
            self._all_answered.set()

    async def _serve_batch(self, batch: Batch) -> None:
        try:
            await self._answer_batch(batch)
        finally:
            self._end_handling()

    async def _answer_batch(self, batch: Batch) -> None:
        answers: list[dict[str, Any]] = []
        async with anyio.create_task_group() as tg:
            for item in batch.items:
                if isinstance(item, Malformed):
                    if not of_notification(item.error):  # (a notification is never answered)
                        answers.append(to_wire(error_response(item.id, item.error)))
                elif isinstance(item, Request):
                    tg.start_soon(self._collect, item, answers)
                else:
                    await self._dispatch(item)
        if answers:
            with contextlib.suppress(PeerClosed):
                await self._transmit(dumps(answers))

    async def _collect(self, request: Request, answers: list[dict[str, Any]]) -> None:
        admitted = self._inbound.admit(request)
        answer = (
            admitted if isinstance(admitted, ErrorResponse) else await self._inbound.run(request, admitted, self.notify)
        )
        if answer is not None:
            answers.append(to_wire(answer))

    async def _start_handler(self, request: Request) -> None:
        admitted = self._inbound.admit(request)
        if isinstance(admitted, ErrorResponse):
            with suppress(PeerClosed):
                await self._send(admitted)
            return
        self._begin_handling()
        # a plain asyncio task, not the task group's: anyio's start_soon cost several times more on every
        # request (the request's own cancellation is asyncio's already, gateway/inbound.py)
        task = asyncio.get_running_loop().create_task(self._handle(request, admitted))
        self._handlers.add(task)
        task.add_done_callback(self._handler_done)

    def _handler_done(self, task: asyncio.Task[None]) -> None:
        self._handlers.discard(task)
        if not task.cancelled() and (failure := task.exception()) is not None:
            self._log.error("request_handler_crashed", error=repr(failure)[:300])

    async def _stop_handlers(self) -> None:
        """The requests still running when the peer ends are cancelled, and waited for (as the task
        group's children were): none outlives ``run()``."""
        handlers = list(self._handlers)
        if not handlers:
            return
        for task in handlers:
            task.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.wait(handlers)

    async def _handle(self, request: Request, admitted: Admitted) -> None:
        try:
            answer = await self._inbound.run(request, admitted, self.notify)
            if answer is not None:
                with suppress(PeerClosed):
                    await self._send(answer)
        finally:
            self._end_handling()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._closed_event.set()
        for pending in self._pending.values():
            pending.settle(PeerClosed())

    async def aclose(self) -> None:
        self._close()
        await self._stream.aclose()
