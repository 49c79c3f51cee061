"""A server that knows only revision 2024-11-05 (hand-written: the SDK would negotiate up): it answers
``initialize`` with 2024-11-05 whatever is asked, declares no completions capability (that revision had
none, completion was implicit) and refuses anything it does not know, ``server/discover`` included.

``OLD_DIES_ON_UNKNOWN`` makes it die on a method it does not know, as Python SDK servers up to mcp 1.8.1
do on ``server/discover`` (a validation error ends their stdio loop): ``silent`` exits without an
answer, ``after-error`` answers with an error first. ``OLD_COUNT_STARTS`` names a file that gets one
line per start."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from gateway import start_up

start_up.resume()

PROMPTS = [
    {"name": "haiku", "description": "a haiku about a topic", "arguments": [{"name": "topic", "required": True}]}
]


def answer(request_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "initialize":
        info = {"name": "old-2024", "version": "1"}
        return {"result": {"protocolVersion": "2024-11-05", "capabilities": {"prompts": {}}, "serverInfo": info}}
    if method == "ping":
        return {"result": {}}
    if method == "prompts/list":
        return {"result": {"prompts": PROMPTS}}
    if method == "prompts/get" and params.get("name") == "haiku":
        topic = (params.get("arguments") or {}).get("topic", "")
        text = f"Write a haiku about {topic}."
        return {"result": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}}
    if method == "completion/complete":
        value = (params.get("argument") or {}).get("value", "")
        return {"result": {"completion": {"values": [t for t in ("autumn", "august") if t.startswith(value)]}}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


def main() -> None:
    dies = os.environ.get("OLD_DIES_ON_UNKNOWN")
    if os.environ.get("OLD_COUNT_STARTS"):
        with open(os.environ["OLD_COUNT_STARTS"], "a") as starts:
            starts.write("start\n")
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message and "method" in message:
            reply = answer(message["id"], message["method"], message.get("params") or {})
            if dies and "error" in reply:
                if dies == "after-error":
                    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}) + "\n")
                    sys.stdout.flush()
                sys.stderr.write(
                    f"pydantic_core.ValidationError: 1 validation error for ClientRequest: {message['method']}\n"
                )
                sys.exit(1)
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
