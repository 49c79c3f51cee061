"""Revision 2026-07-28 and later ("modern"): stateless requests, sans I/O.

A modern request carries its protocol version and the client's capabilities in ``params._meta``;
there is no handshake and no session. This module reads and checks that envelope, checks the HTTP
headers that mirror the body (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``), and writes
the envelope the gateway itself sends to modern upstreams. The order of the checks follows the
spec's ladder: envelope present, then headers agree with the body, then the version is one we speak.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from gateway.protocol.errors import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_NAME_SHOWN,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    RATE_LIMITED,
    UNSUPPORTED_PROTOCOL_VERSION,
    HeaderMismatch,
    InvalidParams,
    InvalidRequest,
    UnsupportedVersion,
    shown,
)
from gateway.protocol.jsonrpc import JSON_OBJECT, Batch, Malformed, Request, meta_problem
from gateway.protocol.versions import MODERN_VERSIONS

RESERVED_PREFIX = "io.modelcontextprotocol/"
PROTOCOL_VERSION_KEY = RESERVED_PREFIX + "protocolVersion"
CLIENT_CAPABILITIES_KEY = RESERVED_PREFIX + "clientCapabilities"
CLIENT_INFO_KEY = RESERVED_PREFIX + "clientInfo"
SERVER_INFO_KEY = RESERVED_PREFIX + "serverInfo"
SUBSCRIPTION_ID_KEY = RESERVED_PREFIX + "subscriptionId"

NAME_BEARING_METHODS: Mapping[str, str] = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""Methods whose ``params.<field>`` is mirrored in the ``Mcp-Name`` header."""

HTTP_STATUS_FOR_CODE: Mapping[int, int] = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
    RATE_LIMITED: 429,  # the gateway's own: its data.retryAfterMs is also said as Retry-After
}
"""The HTTP status of a modern error answer; codes not listed are answered with 200."""

RECOGNIZED_MODERN_ERRORS = frozenset(
    {HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
)
"""Error codes that only a modern server sends: seeing one proves the peer is modern (no fallback)."""

_SENTINEL = re.compile(r"^=\?base64\?(?P<payload>.*)\?=\Z", re.DOTALL)
_HEADER_SAFE = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?\Z")


_ABSENT: Any = object()


class Envelope(NamedTuple):
    """What a modern request says about itself (a named tuple: read on every modern request, and a
    frozen dataclass costs three times more to make)."""

    version: str
    capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any] | None


def carries_envelope(params: Mapping[str, Any] | None) -> bool:
    """Whether a request claims to be modern. The version key alone decides, so a half-built envelope
    is judged (and refused with a reason) as modern rather than served as legacy."""
    meta = params.get("_meta") if isinstance(params, JSON_OBJECT) else None
    return meta is not None and isinstance(meta, JSON_OBJECT) and PROTOCOL_VERSION_KEY in meta


def in_batch(batch: Batch) -> Batch:
    """A batch as served: a member that claims to be 2026-07-28 (an envelope) is refused, -32600, for that
    revision has no batches; and a batch is answered once all its members are, so a ``subscriptions/listen``
    in one held every other member's answer (and the HTTP response) for as long as it listened."""
    if not any(isinstance(item, Request) and carries_envelope(item.params) for item in batch.items):
        return batch
    return Batch(
        tuple(
            Malformed(InvalidRequest(BATCHED_MODERN_REQUEST), item.id)
            if isinstance(item, Request) and carries_envelope(item.params)
            else item
            for item in batch.items
        )
    )


BATCHED_MODERN_REQUEST = (
    "Invalid Request: a 2026-07-28 request (its _meta names a protocol version) cannot be sent in a batch; "
    "send it on its own"
)


def read_envelope(params: Mapping[str, Any] | None) -> Envelope:
    """The envelope of a request, or InvalidParams naming what is missing or malformed."""
    meta = params.get("_meta") if isinstance(params, JSON_OBJECT) else None
    if not isinstance(meta, JSON_OBJECT):
        raise InvalidParams(
            f"Invalid params: _meta must be an object carrying {PROTOCOL_VERSION_KEY} and {CLIENT_CAPABILITIES_KEY}"
        )
    version, capabilities = meta.get(PROTOCOL_VERSION_KEY, _ABSENT), meta.get(CLIENT_CAPABILITIES_KEY, _ABSENT)
    if version is _ABSENT or capabilities is _ABSENT:
        missing = [key for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if key not in meta]
        raise InvalidParams(f"Invalid params: _meta is missing {', '.join(missing)}")
    if not isinstance(version, str):
        raise InvalidParams(f"Invalid params: _meta.{PROTOCOL_VERSION_KEY} must be a string")
    if not isinstance(capabilities, JSON_OBJECT):
        raise InvalidParams(f"Invalid params: _meta.{CLIENT_CAPABILITIES_KEY} must be an object")
    problem = meta_problem(params)  # (its progressToken)
    if problem is not None:
        raise InvalidParams(problem)
    info = meta.get(CLIENT_INFO_KEY)
    if info is not None and not isinstance(info, JSON_OBJECT):  # (it may be left out: not given a wrong type)
        raise InvalidParams(f"Invalid params: _meta.{CLIENT_INFO_KEY} must be an object")
    return Envelope(version, capabilities, info)


def stated_version(params: Mapping[str, Any] | None) -> str | None:
    """The revision a 2026-07-28 request's envelope states, valid or not (its span records it)."""
    meta = (params or {}).get("_meta")
    version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, JSON_OBJECT) else None
    return version[:32] if isinstance(version, str) else None


def _differing_late(first: Any, second: Any) -> str:
    """What to add where two values cut for an error message read alike but differ further on."""
    if isinstance(first, str) and isinstance(second, str) and shown(first) == shown(second):
        return f" (they differ after their first {MAX_NAME_SHOWN} characters)"
    return ""


def check_version(envelope: Envelope) -> None:
    if envelope.version not in MODERN_VERSIONS:
        raise UnsupportedVersion(envelope.version, supported_versions())


def supported_versions() -> list[str]:
    """The revisions a stateless request may name, newest first: the same list ``server/discover``
    gives (the handshake revisions are reached through ``initialize``, not through this envelope)."""
    return list(reversed(MODERN_VERSIONS))


# ---- HTTP header mirroring ---------------------------------------------------------------------


def _plain(value: str) -> bool:
    """What ``_HEADER_SAFE`` matches, and not the sentinel's start, found by string methods in C (the
    regexes cost more, on every request's name): visible ASCII, inner spaces only, not empty."""
    return (
        value.isascii()
        and value.isprintable()
        and value[:1] not in ("", " ")
        and value[-1] != " "
        and not value.startswith("=?base64?")
    )


def encode_header_value(value: str) -> str:
    """A header-safe rendering: as it is when plain visible ASCII, else the ``=?base64?...?=`` form."""
    if _plain(value) or (_HEADER_SAFE.match(value) and not _SENTINEL.match(value)):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def decode_header_value(value: str) -> str | None:
    """The value a header carries, or None when it is not a valid header value at all."""
    if _plain(value):
        return value
    match = _SENTINEL.match(value)
    if match is None:
        return value if value == "" or _HEADER_SAFE.match(value) else None
    try:
        return base64.b64decode(match["payload"], validate=True).decode()
    except (binascii.Error, ValueError):
        return None


def request_headers(method: str, params: Mapping[str, Any] | None, version: str) -> dict[str, str]:
    """The headers a modern client sends with a request (the gateway, towards an upstream)."""
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": method}
    field = NAME_BEARING_METHODS.get(method)
    if field is not None and isinstance(params, JSON_OBJECT) and isinstance(params.get(field), str):
        headers["Mcp-Name"] = encode_header_value(params[field])
    return headers


def check_headers(headers: Mapping[str, str], method: str, params: Mapping[str, Any] | None, version: str) -> None:
    """HeaderMismatch unless the mirrored headers (lower-case names) agree with the body."""
    stated = headers.get("mcp-protocol-version")
    if stated is None:
        raise HeaderMismatch("Header mismatch: the MCP-Protocol-Version header is required")
    if stated != version:
        raise HeaderMismatch(
            f"Header mismatch: MCP-Protocol-Version header {shown(stated)!r} "
            f"does not match _meta version {shown(version)!r}{_differing_late(stated, version)}"
        )
    stated_method = headers.get("mcp-method")
    if stated_method is None:
        raise HeaderMismatch("Header mismatch: the Mcp-Method header is required")
    if stated_method != method:
        raise HeaderMismatch(
            f"Header mismatch: Mcp-Method header {shown(stated_method)!r} does not match body {shown(method)!r}"
            f"{_differing_late(stated_method, method)}"
        )
    field = NAME_BEARING_METHODS.get(method)
    if field is None:
        return
    raw_name = headers.get("mcp-name")
    if raw_name is None:
        raise HeaderMismatch(f"Header mismatch: the Mcp-Name header is required for {method}")
    name = decode_header_value(raw_name)
    if name is None:
        raise HeaderMismatch("Header mismatch: the Mcp-Name header is not a valid header value")
    body_value = params.get(field) if isinstance(params, JSON_OBJECT) else None
    if name != body_value:
        raise HeaderMismatch(f"Header mismatch: Mcp-Name header {shown(name)!r} does not match params.{field}")


# ---- what the gateway sends upstream -----------------------------------------------------------


def without_envelope(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``params`` with the reserved per-request keys removed (they describe the client's request to us,
    not ours to the upstream); other ``_meta`` keys (progress token, trace context) stay."""
    if params is None:
        return None
    meta = params.get("_meta")
    if meta is None or not isinstance(meta, JSON_OBJECT) or not any(key.startswith(RESERVED_PREFIX) for key in meta):
        return dict(params)
    kept = _unreserved(meta)
    rest = {key: value for key, value in params.items() if key != "_meta"}
    return {**rest, "_meta": kept} if kept else rest


def _unreserved(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``_meta`` without the keys reserved for the envelope (progress token, trace context stay)."""
    return {key: value for key, value in meta.items() if not key.startswith(RESERVED_PREFIX)}


def with_envelope(params: Mapping[str, Any] | None, *, version: str, client_info: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` as a modern request from the gateway. The client's capabilities (when it is modern)
    travel on, so an upstream's multi round-trip requests reach a client that can answer them."""
    outgoing = dict(params) if params is not None else {}
    meta = outgoing.pop("_meta", None)
    if not isinstance(meta, JSON_OBJECT):
        meta = {}
    capabilities = meta.get(CLIENT_CAPABILITIES_KEY)
    outgoing["_meta"] = {
        **_unreserved(meta),
        PROTOCOL_VERSION_KEY: version,
        CLIENT_CAPABILITIES_KEY: dict(capabilities) if isinstance(capabilities, JSON_OBJECT) else {},
        CLIENT_INFO_KEY: dict(client_info),
    }
    return outgoing
