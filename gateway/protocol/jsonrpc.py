"""JSON-RPC 2.0 messages as frozen values, and their decoding/encoding from/to bytes.

Like h11's events: transports hand bytes in, get messages out, and nothing here waits on anything.
Parameters and results stay plain JSON dicts so a proxy can relay fields it does not know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeAlias

from gateway.errors import GatewayError, InvalidRequest, ParseError

RequestId: TypeAlias = "str | int"
JSONObject: TypeAlias = "dict[str, Any]"


@dataclass(frozen=True, slots=True)
class Request:
    id: RequestId
    method: str
    params: JSONObject | None = None


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: JSONObject | None = None


@dataclass(frozen=True, slots=True)
class Response:
    id: RequestId
    result: JSONObject


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    id: RequestId | None
    error: JSONObject


Message: TypeAlias = "Request | Notification | Response | ErrorResponse"


@dataclass(frozen=True, slots=True)
class Malformed:
    """A batch member that is not a valid message; answered with its error, the rest still served."""

    error: GatewayError
    id: RequestId | None = None


@dataclass(frozen=True, slots=True)
class Batch:
    items: tuple[Message | Malformed, ...]


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _from_object(obj: Any) -> Message:
    if not isinstance(obj, dict):
        raise InvalidRequest("Invalid Request: a message must be a JSON object")
    raw_id = obj.get("id")
    request_id = raw_id if _valid_id(raw_id) else None
    if obj.get("jsonrpc") != "2.0":
        raise _invalid('"jsonrpc" must be "2.0"', request_id)
    if "id" in obj and request_id is None:
        raise _invalid('"id" must be a string or an integer', None)
    params = obj.get("params")
    if "method" in obj:
        method = obj["method"]
        if not isinstance(method, str):
            raise _invalid('"method" must be a string', request_id)
        if params is not None and not isinstance(params, dict):
            raise _invalid('"params" must be an object', request_id)
        if request_id is None:
            return Notification(method, params)
        return Request(request_id, method, params)
    if "result" in obj and request_id is not None:
        result = obj["result"]
        if not isinstance(result, dict):
            raise _invalid('"result" must be an object', request_id)
        return Response(request_id, result)
    if "error" in obj:
        error = obj["error"]
        if not isinstance(error, dict) or not isinstance(error.get("code"), int):
            raise _invalid('"error" must be an object with an integer "code"', request_id)
        return ErrorResponse(request_id, error)
    raise _invalid('a message needs "method", "result" or "error"', request_id)


def _invalid(problem: str, request_id: RequestId | None) -> InvalidRequest:
    error = InvalidRequest(f"Invalid Request: {problem}")
    error.data = None
    error.request_id = request_id  # type: ignore[attr-defined]
    return error


def request_id_of(error: BaseException) -> RequestId | None:
    """The id recovered from a malformed message, so its error answer can still be correlated."""
    value = getattr(error, "request_id", None)
    return value if _valid_id(value) else None


def decode(data: bytes | str) -> Message | Batch:
    """Parse one frame. Raises ParseError (not JSON) or InvalidRequest (not JSON-RPC)."""
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ParseError("Parse error: the message is not valid UTF-8 JSON") from exc
    if isinstance(obj, list):
        if not obj:
            raise InvalidRequest("Invalid Request: empty batch")
        items: list[Message | Malformed] = []
        for member in obj:
            try:
                items.append(_from_object(member))
            except InvalidRequest as exc:
                items.append(Malformed(exc, request_id_of(exc)))
        return Batch(tuple(items))
    return _from_object(obj)


def to_wire(message: Message) -> JSONObject:
    if isinstance(message, Request):
        out: JSONObject = {"jsonrpc": "2.0", "id": message.id, "method": message.method}
        if message.params is not None:
            out["params"] = message.params
        return out
    if isinstance(message, Notification):
        out = {"jsonrpc": "2.0", "method": message.method}
        if message.params is not None:
            out["params"] = message.params
        return out
    if isinstance(message, Response):
        return {"jsonrpc": "2.0", "id": message.id, "result": message.result}
    return {"jsonrpc": "2.0", "id": message.id, "error": message.error}


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)  # built once, not per call


def dumps(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode()


def encode(message: Message) -> bytes:
    return dumps(to_wire(message))


def error_response(request_id: RequestId | None, error: GatewayError) -> ErrorResponse:
    return ErrorResponse(request_id, error.to_error_object())
