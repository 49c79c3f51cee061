"""A deliberately misbehaving MCP prompt server, written on raw JSON lines for full control.

Each prompt is one fault: ``ok``, ``crash`` (exits mid-request), ``hang`` (never answers), ``slow``
(answers after 30 s unless cancelled), ``garbage`` (answers with a line that is not JSON),
``wrong_id``, ``bad_result`` (invalid role and base64), ``huge`` (an answer over any sane limit;
``huge_id_last`` the same with its id last, as the TypeScript SDK orders a message's members),
``progress`` (two progress notifications first), ``storm`` (``count`` list_changed in a burst),
``cancel_status`` (which request ids were slow, and which of them were cancelled), and values JSON can
spell but UTF-8 JSON cannot carry: ``surrogate_result`` (a lone surrogate in the text), ``nan_meta``
(NaN in ``_meta``), ``surrogate_request`` (asks the gateway something under a lone-surrogate id first),
``surrogate_progress`` (a progress notification with a lone-surrogate token first), ``forge_progress``
(progress notifications for ``count`` guessed tokens, then an answer).
``FAULT_LIST=nonstring_cursor`` makes prompts/list answer a numeric cursor; ``FAULT_LIST_DELAY`` delays it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from gateway import start_up

start_up.resume()

PROMPTS = [
    "ok",
    "crash",
    "hang",
    "slow",
    "garbage",
    "wrong_id",
    "bad_result",
    "huge",
    "huge_id_last",
    "progress",
    "storm",
    "cancel_status",
    "surrogate_result",
    "nan_meta",
    "surrogate_request",
    "surrogate_progress",
    "forge_progress",
    "deep_result",
    "deeper_result",
]
write_lock = threading.Lock()
waiting: dict[Any, threading.Event] = {}
slow_ids: list[Any] = []
cancelled_ids: list[Any] = []


def send_raw(line: bytes) -> None:
    with write_lock:
        sys.stdout.buffer.write(line + b"\n")
        sys.stdout.buffer.flush()


def send(message: dict[str, Any]) -> None:
    send_raw(json.dumps(message).encode())


def reply(request_id: Any, result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def text(value: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": {"type": "text", "text": value}}]}


def get_prompt(request_id: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    if name == "ok":
        reply(request_id, text("fine"))
    elif name == "crash":
        os._exit(3)
    elif name == "hang":
        return
    elif name == "slow":
        event = waiting[request_id] = threading.Event()
        slow_ids.append(request_id)
        if not event.wait(float((params.get("arguments") or {}).get("seconds", "30"))):
            reply(request_id, text("slow answer"))
    elif name == "garbage":
        send_raw(b"this is not json {")
    elif name == "wrong_id":
        reply(f"not-{request_id}", text("to nobody"))
    elif name == "bad_result":
        reply(
            request_id, {"messages": [{"role": "robot", "content": {"type": "image", "data": "%%", "mimeType": "x"}}]}
        )
    elif name == "huge":
        reply(request_id, text("x" * (6 * 1024 * 1024)))
    elif name == "huge_id_last":
        send({"result": text("x" * (6 * 1024 * 1024)), "jsonrpc": "2.0", "id": request_id})
    elif name == "progress":
        token = (params.get("_meta") or {}).get("progressToken")
        for step in (1, 2):
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": step, "total": 2},
                }
            )
        reply(request_id, text(f"progressed with token {token}"))
    elif name == "storm":
        for _ in range(int((params.get("arguments") or {}).get("count", "100"))):
            send({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"})
        reply(request_id, text("stormed"))
    elif name == "surrogate_result":
        reply(request_id, text("broken \udfff text"))  # json.dumps writes it as the escape \udfff
    elif name == "nan_meta":
        reply(request_id, {**text("fine text"), "_meta": {"score": float("nan")}})  # written as NaN
    elif name == "deep_result":  # nested past the gateway's bound (which it could not have written on)
        deep: Any = "bottom"
        for _ in range(300):
            deep = {"a": deep}
        reply(request_id, {**text("fine text"), "_meta": {"deep": deep}})
    elif name == "deeper_result":  # past what any JSON parser here reads (orjson 1,024, the standard library ~1,000)
        depth = 5000
        send_raw(
            b'{"jsonrpc":"2.0","id":'
            + json.dumps(request_id).encode()
            + b',"result":{"messages":[],"_meta":{"d":'
            + b'{"a":' * depth
            + b"1"
            + b"}" * depth
            + b"}}}"
        )
    elif name == "surrogate_request":
        send({"jsonrpc": "2.0", "id": "\ud800", "method": "roots/list"})
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "\ud800"}})
        reply(request_id, text("asked first"))
    elif name == "surrogate_progress":
        send(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "\udfff", "progress": 1}}
        )
        reply(request_id, text("progress sent"))
    elif name == "forge_progress":
        count = int((params.get("arguments") or {}).get("count", "100"))
        for guess in range(1, count + 1):
            for token in (guess, str(guess), f"gw-progress-{guess}"):
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": 1, "message": "forged"},
                    }
                )
        reply(request_id, text("forged"))
    elif name == "cancel_status":
        reply(request_id, text(json.dumps({"slow": slow_ids, "cancelled": cancelled_ids})))
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": f"Unknown prompt: {name}"}})


def handle(message: dict[str, Any]) -> None:
    method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
    if method == "initialize":
        reply(
            request_id,
            {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"prompts": {"listChanged": True}},
                "serverInfo": {"name": "faulty"},
            },
        )
    elif method == "notifications/cancelled":
        cancelled_ids.append(params.get("requestId"))
        event = waiting.get(params.get("requestId"))
        if event is not None:
            event.set()
    elif method == "prompts/list":
        time.sleep(float(os.environ.get("FAULT_LIST_DELAY", "0")))
        result: dict[str, Any] = {"prompts": [{"name": n} for n in PROMPTS]}
        if os.environ.get("FAULT_LIST") == "nonstring_cursor":
            result["nextCursor"] = 5
        reply(request_id, result)
    elif method == "prompts/get":
        get_prompt(request_id, params)
    elif method == "ping":
        reply(request_id, {})
    elif request_id is not None:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"Method not found: {method}"}})


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            threading.Thread(target=handle, args=(json.loads(line),), daemon=True).start()


if __name__ == "__main__":
    main()
