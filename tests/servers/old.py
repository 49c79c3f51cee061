"""A server that knows only revision 2024-11-05 (hand-written: the SDK would negotiate up): it answers
``initialize`` with 2024-11-05 whatever is asked, declares no completions capability (that revision had
none, completion was implicit) and refuses anything it does not know, ``server/discover`` included."""

from __future__ import annotations

import json
import sys
from typing import Any

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
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message and "method" in message:
            reply = answer(message["id"], message["method"], message.get("params") or {})
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
