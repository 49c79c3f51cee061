"""The tracing seam: the spans the gateway reports, named and attributed as the OpenTelemetry
conventions for MCP say (``docs/observability.md`` lists them), behind an interface whose default does
nothing and imports nothing of the OpenTelemetry SDK.

``[telemetry] enabled`` installs the SDK-backed implementation (``observability/otel.py``) at start;
until then, and when it is off, every call here is a no-op costing a function call. Front ends say
how a request arrived (``RECEIVED_OVER``, a context variable: it follows the request into the tasks
that serve it); the service opens the SERVER span, each upstream connector a CLIENT span, and the
steps that take time (a listing's fan-out, a prompt file's render, a token check) spans of their own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from gateway.protocol.jsonrpc import Request, RequestId
from gateway.protocol.trace_context import TRACE_KEYS, from_headers

NO_TRACE: Mapping[str, str] = MappingProxyType({})
"""The trace context of a request that carries none."""


class Arrival(NamedTuple):
    """How a client's request came in, as the conventions record a transport. A named tuple, not a
    frozen dataclass: one is made per HTTP request while tracing is on, and a frozen dataclass's
    ``__init__`` sets each of its six fields through ``object.__setattr__`` (twice the cost)."""

    transport: str  # network.transport: "pipe" (stdio) or "tcp"
    protocol: str | None = None  # network.protocol.name: "http"
    protocol_version: str | None = None  # network.protocol.version: "1.1"
    address: str | None = None  # client.address
    port: int | None = None  # client.port
    http_trace: Mapping[str, str] = NO_TRACE  # the HTTP request's traceparent et al.


RECEIVED_OVER: ContextVar[Arrival | None] = ContextVar("received_over", default=None)
STDIO = Arrival("pipe")


@dataclass(frozen=True, slots=True)
class Destination:
    """An upstream as its CLIENT spans name it."""

    namespace: str
    transport: str  # "pipe" or "tcp"
    address: str | None = None  # server.address (an HTTP upstream's host)
    port: int | None = None
    protocol_version: str | None = None  # network.protocol.version of an HTTP upstream's requests


class ClientSpan(Protocol):
    def inject(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """``params`` carrying this span's trace context in ``_meta`` (unchanged when not tracing)."""

    def sent(self, request_id: RequestId) -> None:
        """The JSON-RPC id the request went out with."""


class Tracing(Protocol):
    enabled: bool

    def server(
        self, request: Request, *, mcp_version: str | None, session_id: str | None
    ) -> AbstractContextManager[None]:
        """Around serving one client request: its SERVER span and ``mcp.server.operation.duration``."""

    def client(
        self, method: str, params: dict[str, Any] | None, *, to: Destination, mcp_version: str | None
    ) -> AbstractContextManager[ClientSpan]:
        """Around one request to an upstream: its CLIENT span and ``mcp.client.operation.duration``."""

    def step(self, name: str, **attributes: str | int) -> AbstractContextManager[None]:
        """Around a step of the gateway's own that can take time (an INTERNAL span)."""

    def session_ended(self, duration_s: float, *, mcp_version: str | None, arrival: Arrival | None) -> None:
        """A handshake-era session ended (``mcp.server.session.duration``; 2026-07-28 has no sessions)."""

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Export what is buffered and stop, within ``timeout_s`` (None: as long as the exporters take)."""


class _Untraced:
    def inject(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        return params

    def sent(self, request_id: RequestId) -> None:
        return


class NoTracing:
    """Tracing off: nothing recorded, nothing imported."""

    enabled = False
    _client = nullcontext(_Untraced())
    _none: AbstractContextManager[None] = nullcontext()

    def server(
        self, request: Request, *, mcp_version: str | None, session_id: str | None
    ) -> AbstractContextManager[None]:
        return self._none

    def client(
        self, method: str, params: dict[str, Any] | None, *, to: Destination, mcp_version: str | None
    ) -> AbstractContextManager[ClientSpan]:
        return self._client

    def step(self, name: str, **attributes: str | int) -> AbstractContextManager[None]:
        return self._none

    def session_ended(self, duration_s: float, *, mcp_version: str | None, arrival: Arrival | None) -> None:
        return

    def shutdown(self, timeout_s: float | None = None) -> None:
        return


_installed: list[Tracing] = [NoTracing()]


def tracing() -> Tracing:
    """The tracing in force (the SDK's once ``[telemetry]`` installed it, else the no-op)."""
    return _installed[0]


def install(implementation: Tracing) -> None:
    _installed[0] = implementation


_TRACE_HEADERS = tuple((key.encode(), key) for key in TRACE_KEYS)


def arrival_over_http(scope: Mapping[str, Any]) -> Arrival:
    """How an HTTP request came in, from its ASGI scope (its trace headers among the rest)."""
    client = scope.get("client")
    given = dict(scope["headers"])  # in C; of a repeated header the last one wins, as it always has here
    headers = {key: given[name].decode("latin-1") for name, key in _TRACE_HEADERS if name in given}
    return Arrival(
        "tcp",
        "http",
        str(scope.get("http_version", "1.1")),
        address=client[0] if client else None,
        port=client[1] if client else None,
        http_trace=from_headers(headers) if headers else NO_TRACE,
    )


@contextmanager
def installed(implementation: Tracing) -> Iterator[Tracing]:
    """``implementation`` in force while the gateway runs; shut down (its buffer exported) after."""
    previous = _installed[0]
    install(implementation)
    try:
        yield implementation
    finally:
        install(previous)
        implementation.shutdown()


def session_label(session_id: str) -> str:
    """What ``mcp.session.id`` records of a session id: a digest, never the id (over HTTP the id lets
    whoever holds it go on with the session, and traces are read by more people than hold tokens)."""
    return hashlib.sha256(session_id.encode()).hexdigest()[:32]


MAX_TARGET_CHARS = 256


def target_of(method: str, params: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(gen_ai.prompt.name, gen_ai.tool.name) a request names: a get's ``name``, a completion's prompt
    ``ref.name``, a tool call's ``name``; the span is named after it (low cardinality: it is a name)."""
    if not isinstance(params, Mapping):
        return None, None
    if method == "prompts/get":
        name = params.get("name")
        return (name[:MAX_TARGET_CHARS] if isinstance(name, str) else None), None
    if method == "completion/complete":
        ref = params.get("ref")
        if isinstance(ref, Mapping) and ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
            return ref["name"][:MAX_TARGET_CHARS], None
        return None, None
    if method == "tools/call":
        name = params.get("name")
        return None, (name[:MAX_TARGET_CHARS] if isinstance(name, str) else None)
    return None, None


RESOURCE_URI_METHODS = frozenset({"resources/read", "resources/directory/read", "skills/get"})
"""Requests whose params name a resource by ``uri``: the conventions' ``mcp.resource.uri`` is set for
them ("a request type that includes a resource URI parameter"; a skill's ``SKILL.md`` and its folders
are resources, SEP-2640). It is a span attribute only: never in a span's name or a metric's series."""
MAX_URI_CHARS = 1024


def resource_of(method: str, params: Mapping[str, Any] | None) -> str | None:
    """The ``mcp.resource.uri`` a request names, cut to ``MAX_URI_CHARS``; None for other requests."""
    if method not in RESOURCE_URI_METHODS or not isinstance(params, Mapping):
        return None
    uri = params.get("uri")
    return uri[:MAX_URI_CHARS] if isinstance(uri, str) else None
