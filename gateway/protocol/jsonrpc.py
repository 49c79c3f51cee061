"""JSON-RPC 2.0 messages as frozen values, and their decoding/encoding from/to bytes.

Like h11's events: transports hand bytes in, get messages out, and nothing here waits on anything.
Parameters and results stay plain JSON dicts so a proxy can relay fields it does not know.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import orjson

from gateway.protocol.errors import GatewayError, InvalidParams, InvalidRequest, ParseError

JSON_OBJECT: Final = (dict, Mapping)
"""For ``isinstance``: a JSON object as decoded (a dict, checked in C first) or any other mapping (the
ABC's check, a Python call, is reached only for what is no dict: on a hot path, test for None, an absent
key's value, before)."""

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


@dataclass(frozen=True, slots=True)
class UnusableResponse:
    """An answer whose result or error cannot be relayed (a lone surrogate, a non-finite number): the
    request it answers fails with ``problem``, naming the peer that sent it, instead of waiting in vain."""

    id: RequestId
    problem: str


Message: TypeAlias = "Request | Notification | Response | ErrorResponse | UnusableResponse"


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


def _from_object(obj: Any, suspect: bool, deep: bool = False) -> Message:
    if not isinstance(obj, dict):
        raise InvalidRequest("Invalid Request: a message must be a JSON object")
    raw_id = obj.get("id")
    request_id: RequestId | None = raw_id if _valid_id(raw_id) else None
    if suspect or (deep and nested_past(obj, MAX_NESTING)):
        problem = unrepresentable(obj, MAX_NESTING if deep else None)
        if problem is not None:
            return _refuse_unrepresentable(obj, problem, request_id)
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
            return UnusableResponse(request_id, '"result" is not an object')  # its request fails now, not later
        return Response(request_id, result)
    if "error" in obj:
        error = obj["error"]
        if not isinstance(error, dict) or not isinstance(error.get("code"), int):
            if request_id is not None:
                return UnusableResponse(request_id, '"error" is not an object with an integer "code"')
            raise _invalid('"error" must be an object with an integer "code"', request_id)
        return ErrorResponse(request_id, error)
    raise _invalid('a message needs "method", "result" or "error"', request_id)


def meta_problem(params: Mapping[str, Any] | None) -> str | None:
    """What is wrong with a request's ``_meta``, if anything: it is an object, and its ``progressToken``
    (if any) a string or an integer, as every revision's schema says. Checked as a request is admitted,
    for every method at once (one holding anything else was served, and relayed upstream as it came)."""
    if params is None or "_meta" not in params:
        return None
    meta = params["_meta"]
    if not isinstance(meta, dict):
        return "Invalid params: params._meta must be an object"
    if "progressToken" in meta and not _valid_id(meta["progressToken"]):
        return "Invalid params: params._meta.progressToken must be a string or an integer"
    return None


def _invalid(problem: str, request_id: RequestId | None) -> InvalidRequest:
    error = InvalidRequest(f"Invalid Request: {problem}")
    error.data = None
    error.request_id = request_id  # type: ignore[attr-defined]
    return error


MAX_PATH_SHOWN = 160
"""How much of the path to a refused value an error message shows (its start and its end)."""


def _refuse_unrepresentable(obj: dict[str, Any], problem: tuple[str, str], request_id: RequestId | None) -> Message:
    """A message carrying a value JSON text can hold but Unicode or JSON numbers cannot: refused with the
    error its place calls for (``id``/``method``: -32600; ``params``: -32602; an answer: unusable)."""
    if isinstance(request_id, str) and _has_surrogate(request_id):
        raise _invalid('"id" contains an unpaired UTF-16 surrogate', None)  # no usable id to answer under
    path, what = problem
    top = path.split(".", 1)[0].split("[", 1)[0]
    if len(path) > MAX_PATH_SHOWN:  # (a path 64 levels deep, or through long keys, would be the whole answer)
        path = f"{path[: MAX_PATH_SHOWN // 2]}…{path[-MAX_PATH_SHOWN // 2 :]}"
    if top in ("result", "error") and "method" not in obj and request_id is not None:
        return UnusableResponse(request_id, f"{path} {what}")
    if top == "params" and "method" in obj:
        error = InvalidParams(f"Invalid params: {path} {what}")
        error.request_id = request_id  # type: ignore[attr-defined]
        error.of_notification = "id" not in obj  # type: ignore[attr-defined]  # (never answered: logged)
        raise error
    raise _invalid(f"{path} {what}", request_id)


_SUSPECT_TEXT = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]|NaN|Infinity|[0-9]{19}")
"""What every lone surrogate or non-finite number in a text frame must show (an escape, a surrogate, a
constant), and every integer orjson would not read exactly (past 64 bits: it reads those as floats,
silently): a frame that shows one is read by the standard library, which keeps them as they are."""
_DIGITS_AS_ZEROS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x2E for byte in range(256))
_LONG_RUN = b"0" * 19


def long_integer_in(data: bytes) -> bool:
    """Whether a frame's bytes may hold an integer past 64 bits (a run of 19 digits), which orjson would
    read as a float without a word. Everything else the standard library keeps and orjson cannot (a lone
    surrogate, as an escape or as CESU-8 bytes; ``NaN``, ``Infinity``, a number past the float range)
    orjson refuses, so it needs no screen: the refusal sends the frame to the standard library. Every
    digit is mapped to ``0`` and every other byte to ``.`` (one table lookup a byte), and the run is
    found by the substring search: ``re``'s ``[0-9]{19}`` counted forward from every digit, which cost
    more than reading the frame."""
    return _LONG_RUN in data.translate(_DIGITS_AS_ZEROS)


def _key(key: str) -> str:
    return key.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")


MAX_NESTING = 64
"""How deeply a message's objects and arrays may nest (the message itself is the first level). No MCP
message comes near it; one past it was read (orjson reads 1,024 levels) but could not be written again
(orjson writes 255, the standard library's recursion ends near 1,000) when it was relayed, and an SDK
upstream dropped a frame from about 200 levels without a word: it is refused on arrival instead."""


def _brackets(data: bytes | str) -> int:
    """How many objects and arrays a frame could open: at least its nesting depth (brackets in strings
    count too), so only a frame with more than ``MAX_NESTING`` of them is walked for its depth."""
    if isinstance(data, bytes):
        return data.count(b"{") + data.count(b"[")
    return data.count("{") + data.count("[")


def nested_past(value: Any, limit: int) -> bool:
    """Whether objects or arrays in ``value`` nest deeper than ``limit`` (``value`` the first level). Only
    containers are visited and no path is made (a list page of an upstream's is over the bracket count;
    making every member's path cost 8 times the decode): where it is, is found only for a refusal."""
    level: list[Any] = [value]  # the containers of one level, level by level: no tuple or path per member
    for _ in range(limit):
        deeper: list[Any] = []
        for item in level:
            for member in item.values() if type(item) is dict else item:
                if type(member) is dict or type(member) is list:
                    deeper.append(member)  # noqa: PERF401 - a loop: extend with a generator took 1.7 times as long
        if not deeper:
            return False
        level = deeper
    return True


def unrepresentable(value: Any, max_nesting: int | None = None) -> tuple[str, str] | None:
    """(where, what) for the first string holding a lone surrogate or number that is not finite in a
    decoded JSON value, or (with ``max_nesting``) the first object or array nested deeper than that, or
    None. Such values decode but cannot be encoded as UTF-8 JSON, so one let in would fail later, far
    from its sender. Iterative: depth is bounded only by the message size."""
    stack: list[tuple[str, Any, int]] = [("", value, 1)]
    limit = max_nesting if max_nesting is not None else math.inf
    while stack:
        path, item, depth = stack.pop()
        if depth > limit and isinstance(item, (dict, list)):
            return path or "value", f"is nested more than {max_nesting} levels deep"
        if isinstance(item, str):
            if not item.isascii() and _has_surrogate(item):
                return path or "value", "contains an unpaired UTF-16 surrogate"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return path or "value", "is not a finite number"
        elif isinstance(item, dict):
            for key, member in item.items():
                where = f"{path}.{_key(key)}" if path else _key(key)
                if not key.isascii() and _has_surrogate(key):
                    return where, "has a key with an unpaired UTF-16 surrogate"
                stack.append((where, member, depth + 1))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", member, depth + 1) for i, member in enumerate(item))
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def of_notification(error: BaseException) -> bool:
    """Whether a refused message was a notification (well formed but for its params), which JSON-RPC never
    answers: its refusal is logged."""
    return getattr(error, "of_notification", False) is True


def request_id_of(error: BaseException) -> RequestId | None:
    """The id recovered from a malformed message, so its error answer can still be correlated."""
    value = getattr(error, "request_id", None)
    return value if _valid_id(value) else None


_ID_VALUE = rb'(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")'
_ID_FIRST = re.compile(
    rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID_VALUE + rb'\s*(?:,\s*"(\w{1,16})"|\})'
)
_ID_LAST = re.compile(rb'[,{]\s*"id"\s*:\s*' + _ID_VALUE + rb"\s*\}\s*\Z")
_FIRST_KEY = re.compile(rb'\A\s*\{\s*"(\w{1,16})"')
_KINDS = {b"method": "request", b"result": "response", b"error": "response"}


def id_at_edges(head: bytes, tail: bytes) -> tuple[RequestId, str] | None:
    """The id of a message known only by its first and last bytes (one too large to be read: it is
    skipped, not parsed), and whether it is a ``request`` or a ``response`` (or ``unknown``), so that it
    can be answered, or its request failed, rather than left to time out. Ids run apart in each
    direction, so the kind decides which: a request's id is the peer's, a response's is ours.

    Only an id that is surely the message's own is found: its first member (``{"jsonrpc":"2.0","id":7,
    "method":...``, as the Python SDK writes it: the member after it tells the kind), or its last, right
    before the closing brace (``{"result":...,"jsonrpc":"2.0","id":7}``, the TypeScript SDK's order: the
    first member tells the kind); an ``"id"`` anywhere else may be a member of something nested."""
    first = _ID_FIRST.search(head)
    try:
        if first is not None:
            value, kind = json.loads(first.group(1)), _KINDS.get(first.group(2) or b"", "unknown")
        else:
            last = _ID_LAST.search(tail)
            if last is None:
                return None
            key = _FIRST_KEY.search(head)
            value, kind = json.loads(last.group(1)), _KINDS.get(key.group(1) if key is not None else b"", "unknown")
    except ValueError:  # not UTF-8, a bad escape: no id to answer under (a 413 answered 500 on it)
        return None
    if isinstance(value, str) and _has_surrogate(value):  # (it could not be written back)
        return None
    return (value, kind) if _valid_id(value) else None


def decode(data: bytes | str) -> Message | Batch:
    """Parse one frame. Raises ParseError (not JSON), InvalidRequest (not JSON-RPC) or InvalidParams
    (params holding what JSON text can spell but Unicode cannot carry, or nested past ``MAX_NESTING``)."""
    suspect = long_integer_in(data) if isinstance(data, bytes) else _SUSPECT_TEXT.search(data) is not None
    if not suspect:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            suspect = True  # what orjson cannot hold as it is, or no JSON (the error then names the problem)
    if suspect:
        obj = _decode_leniently(data)
    deep = _brackets(data) > MAX_NESTING
    if isinstance(obj, list):
        if not obj:
            raise InvalidRequest("Invalid Request: empty batch")
        items: list[Message | Malformed] = []
        for member in obj:
            try:
                items.append(_from_object(member, suspect, deep))
            except (InvalidRequest, InvalidParams) as exc:
                items.append(Malformed(exc, request_id_of(exc)))
        return Batch(tuple(items))
    return _from_object(obj, suspect, deep)


def _decode_leniently(data: bytes | str) -> Any:
    """A frame read by the standard library: it takes what JSON text may spell but orjson will not hold
    as it is (an integer past 64 bits, a lone surrogate escape, ``NaN``, UTF-16 bytes), so such a frame
    is answered as it always was, and the error for one that is no JSON names its problem."""
    try:
        return json.loads(data)
    except UnicodeDecodeError as exc:
        raise ParseError(f"Parse error: the message is not valid UTF-8 (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise ParseError(f"Parse error: not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise ParseError("Parse error: the message is nested too deeply") from exc
    except ValueError as exc:  # an integer of more digits than Python converts (its words name Python's knobs)
        limit = sys.get_int_max_str_digits()
        raise ParseError(f"Parse error: a number in the message has more than {limit} digits") from exc


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
    if isinstance(message, UnusableResponse):
        raise TypeError("an unusable response is never sent")
    return {"jsonrpc": "2.0", "id": message.id, "error": message.error}


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)  # built once, not per call
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON. Never raises for a value ``decode`` produced or the gateway built: a lone
    surrogate that slipped in is sent escaped (valid JSON; the peer reads back the same string), a
    non-finite number as null (JSON has no spelling for it). orjson writes what it can (nearly every
    frame, at a fraction of the standard library's cost); what it refuses (an integer past 64 bits, a lone
    surrogate, a key that is no string) the standard library writes as before."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        pass
    try:
        return _ENCODER.encode(obj).encode()
    except UnicodeEncodeError:
        return _ASCII_ENCODER.encode(obj).encode()
    except ValueError:
        return _ASCII_ENCODER.encode(_finite(obj)).encode()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def encode(message: Message) -> bytes:
    return dumps(to_wire(message))


def error_response(request_id: RequestId | None, error: GatewayError) -> ErrorResponse:
    return ErrorResponse(request_id, error.to_error_object())
