"""A 2026-07-28-only prompt server on raw JSON lines whose ``subscriptions/listen`` streams end as soon
as they are acknowledged: the gateway has to keep re-opening them."""

from __future__ import annotations

import json
import sys
from typing import Any

from gateway import start_up

start_up.resume()


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def handle(message: dict[str, Any]) -> None:
    request_id, method = message.get("id"), message.get("method")
    if request_id is None:
        return  # notifications need no answer
    if method == "server/discover":
        capabilities = {"prompts": {"listChanged": True}}
        result: dict[str, Any] = {"supportedVersions": ["2026-07-28"], "capabilities": capabilities}
    elif method == "prompts/list":
        result = {"prompts": [{"name": "only"}]}
    elif method == "subscriptions/listen":
        acknowledged = {"notifications": {"promptsListChanged": True}}
        send({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": acknowledged})
        result = {}  # and the stream is over
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})
        return
    send({"jsonrpc": "2.0", "id": request_id, "result": {**result, "resultType": "complete"}})


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            handle(json.loads(line))


if __name__ == "__main__":
    main()
