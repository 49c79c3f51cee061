"""Every error the gateway raises, each knowing the JSON-RPC code it becomes at the front end.

    GatewayError
     ├── ConfigError                 bad TOML / values; names the key path (reaches a client only as
     │                               why a gateway it launched could not start: failed_start.py)
     ├── ClientError                 the client's request is at fault
     │    ├── ParseError             -32700  not JSON
     │    ├── InvalidRequest         -32600  JSON, but not a JSON-RPC request
     │    ├── MethodNotFound         -32601  unknown method or undeclared capability
     │    ├── InvalidParams          -32602  bad params, unknown prompt, bad cursor, missing argument
     │    │    ├── UnknownPrompt
     │    │    └── InvalidCursor
     │    ├── HeaderMismatch         -32020  HTTP headers disagree with the body (2026-07-28)
     │    ├── RateLimited            -32029  over a [limits] rate; data.retryAfterMs says when to come back
     │    └── UnsupportedVersion     -32022  a per-request protocol version we do not speak (2026-07-28)
     └── UpstreamError               -32603  something behind the gateway failed; never blames the client
          ├── UpstreamUnavailable    not connected / went away mid-request
          ├── UpstreamTimeout        no answer within the upstream's timeout_s
          ├── UpstreamProtocolError  answered, but not with a valid MCP result
          │    └── DigestMismatch    a relayed skill file whose bytes are not its manifest's
          ├── UpstreamUnsupported    answered validly, with something the client's revision cannot carry
          └── UpstreamRejected       answered with a JSON-RPC error: its code/message/data are relayed

Errors are translated at the boundaries (transport, rpc, front end) with ``raise ... from exc``.
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
RATE_LIMITED = -32029


class GatewayError(Exception):
    """Root of the tree; carries the JSON-RPC error code it maps to."""

    code: int = INTERNAL_ERROR

    def __init__(self, message: str, *, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def to_error_object(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ConfigError(GatewayError):
    """The configuration cannot be used; the message names the key path."""


class ClientError(GatewayError):
    """The request is at fault."""


class ParseError(ClientError):
    code = PARSE_ERROR


class InvalidRequest(ClientError):
    code = INVALID_REQUEST


class MethodNotFound(ClientError):
    code = METHOD_NOT_FOUND


class InvalidParams(ClientError):
    code = INVALID_PARAMS


class UnknownPrompt(InvalidParams):
    """Also raised for a prompt that policy hides, so that hidden and absent look identical."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown prompt: {shown(name)}")
        self.name = name


MAX_NAME_SHOWN = 100
"""How much of a client's name, method or URI an error message repeats (as much as ``tools/call`` does of
a tool's): a 200 KB name came back whole."""


def shown(text: str) -> str:
    return text if len(text) <= MAX_NAME_SHOWN else f"{text[:MAX_NAME_SHOWN]}…"


class InvalidCursor(InvalidParams):
    def __init__(self, reason: str) -> None:
        # The reason is logged, not sent: a prober learns nothing about the cursor's format.
        super().__init__("Invalid cursor")
        self.reason = reason


class HeaderMismatch(ClientError):
    code = HEADER_MISMATCH


class RateLimited(ClientError):
    """Over a ``[limits]`` rate. ``data`` says which limit and how long until it has room again
    (``retryAfterMs``); over HTTP a request refused outside a session is answered 429 with Retry-After."""

    code = RATE_LIMITED

    def __init__(self, limit: str, retry_after_s: float) -> None:
        retry_ms = max(1, round(retry_after_s * 1000))
        super().__init__(
            f"Rate limited: over the {limit} limit; retry after {retry_ms} ms",
            data={"retryAfterMs": retry_ms, "limit": limit},
        )
        self.limit = limit
        self.retry_after_s = retry_after_s


class UnsupportedVersion(ClientError):
    """Its ``data`` lists what we speak, so the client can retry with one of them."""

    code = UNSUPPORTED_PROTOCOL_VERSION

    def __init__(self, requested: str, supported: list[str]) -> None:
        super().__init__(
            f"Unsupported protocol version: {shown(requested)!r}",
            data={"supported": supported, "requested": shown(requested)},
        )


class UpstreamError(GatewayError):
    """Something behind the gateway failed; the message names the upstream."""

    code = INTERNAL_ERROR

    def __init__(self, upstream: str, message: str, *, data: Any = None) -> None:
        super().__init__(f"Upstream '{upstream}' {message}", data=data)
        self.upstream = upstream


class UpstreamUnavailable(UpstreamError):
    pass


class UpstreamTimeout(UpstreamError):
    pass


class UpstreamProtocolError(UpstreamError):
    pass


class DigestMismatch(UpstreamProtocolError):
    """An upstream's skill file whose bytes are not what its manifest says: refused, never passed on.
    ``reason``: the audit's words for it, which name no file (the upstream chose its URI). ``error_type``:
    what the CLIENT span of the read records as ``error.type``: the upstream answered, but not with the
    bytes it promised (the conventions' low-cardinality name for an error inside a result)."""

    error_type = "digest_mismatch"

    def __init__(self, upstream: str, message: str) -> None:
        super().__init__(upstream, message)
        self.reason = f"Upstream '{upstream}' served bytes that do not match the skill's manifest"


class UpstreamUnsupported(UpstreamError):
    pass


class UpstreamRejected(UpstreamError):
    """The upstream answered with a JSON-RPC error; the client sees the upstream's own code and message.
    ``reason``: why, in words safe to record (never a value), where the gateway's own source (a prompt
    file) answered; else the audit says only which upstream answered which code."""

    def __init__(self, upstream: str, error: dict[str, Any], *, reason: str | None = None) -> None:
        code = error.get("code")
        message = error.get("message")
        super().__init__(upstream, f"answered with error {code}: {message}")
        self.code = code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR
        self.message = message if isinstance(message, str) else "Upstream error"
        self.data = error.get("data")
        self.reason = reason or f"Upstream '{upstream}' answered with error code {self.code} (its message is not kept)"


SAID_BY_THE_GATEWAY = (ClientError, UpstreamTimeout, UpstreamUnavailable)
"""Errors whose words are the gateway's own (an unknown prompt, params that do not validate, an upstream
down or slow): the audit's ``reason`` and a span's status may carry them. An upstream's own message (an
``UpstreamRejected``'s, or what an answer that could not be relayed held) may quote an argument's
value: what records it stays in the operator's hands (the audit records an ``UpstreamRejected``'s or a
``DigestMismatch``'s ``reason`` instead)."""
