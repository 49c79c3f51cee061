"""Requests an upstream sends the client while rendering a prompt (``elicitation/create``,
``sampling/createMessage``, ``roots/list``), relayed to the one client whose request caused them.

An upstream connection is shared by every client, and a handshake-era server does not say which of the
requests in flight an ``elicitation/create`` belongs to. The gateway relays it only where it knows for
certain: exactly one client request is in flight to that upstream, from a client that can be asked
(stdio, or an HTTP session with an event stream to send the request on) and that declared the
capability. Otherwise the upstream gets an error that says why, which fails only the prompt that asked.
Ids are the client connection's own (its peer, or its HTTP session, numbers the request).

Requests are counted by the upstream's connector, not its namespace: while a reload lets the requests of
a replaced connection finish (``retiring.py``), the old and the new connection share the namespace, and
neither may ask for the other's clients.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any

from gateway.protocol.errors import InvalidRequest, MethodNotFound

Ask = Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]]
"""Send a request to the client that made the request being served, and wait for its result."""

CAPABILITY_FOR = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
RELAYED = frozenset(CAPABILITY_FOR)
ADVERTISED_TO_UPSTREAMS: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
"""What the gateway tells upstreams it can do as a client: these three, relayed as above (roots without
``listChanged``: a client's roots changes are not relayed)."""


def asking(
    send: Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]], capabilities: Mapping[str, Any]
) -> Ask:
    """An ``Ask`` for a client with ``capabilities`` (from its initialize) that ``send`` reaches."""

    async def ask(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        needed = CAPABILITY_FOR.get(method)
        if needed is None:
            raise MethodNotFound(f"Method not found: {method}")
        if not isinstance(capabilities.get(needed), dict):
            raise MethodNotFound(f"Method not found: {method} (the client did not declare the {needed} capability)")
        return await send(method, params)

    return ask


class ClientRequestRelay:
    """Which clients' requests are in flight to each upstream, and whether each can be asked."""

    def __init__(self) -> None:
        self._in_flight: dict[int, list[Ask | None]] = {}  # by the connector's id (it lives while they do)

    def route(self, upstream: object, ask: Ask | None) -> _InFlight:
        """While a client's request is with ``upstream`` (its connector; ``ask`` None: a client that
        cannot be asked)."""
        return _InFlight(self._in_flight, id(upstream), ask)

    async def forward(self, upstream: object, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """The result of relaying ``upstream``'s request (its connector's) to the client it is for, or a
        clear refusal."""
        entries = self._in_flight.get(id(upstream), [])
        if not entries:
            raise InvalidRequest(f"Invalid Request: {method} outside any client request: there is no client to ask")
        if len(entries) > 1:
            raise InvalidRequest(
                f"Invalid Request: {len(entries)} client requests are in flight to this server, so the gateway "
                f"cannot tell which client {method} is for"
            )
        ask = entries[0]
        if ask is None:
            raise MethodNotFound(f"Method not found: {method} (this client cannot be asked: it has no session)")
        return await ask(method, params)


class _InFlight:
    """One client request with an upstream, for as long as it is there. A plain context manager: the
    generator-based one cost more than the bookkeeping, on every relayed request."""

    __slots__ = ("_ask", "_in_flight", "_upstream")

    def __init__(self, in_flight: dict[int, list[Ask | None]], upstream: int, ask: Ask | None) -> None:
        self._in_flight, self._upstream, self._ask = in_flight, upstream, ask

    def __enter__(self) -> None:
        self._in_flight.setdefault(self._upstream, []).append(self._ask)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: TracebackType | None) -> None:
        entries = self._in_flight[self._upstream]
        entries.remove(self._ask)
        if not entries:
            del self._in_flight[self._upstream]
