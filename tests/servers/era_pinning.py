"""A stdio server that decides its era as the TypeScript SDK 2.x ``serveStdio`` does (@takescake/1password-mcp
is one): ``server/discover`` opens a probe, and the first request after it pins the connection for good,
to 2026-07-28 when it carries the per-request envelope, to the handshake era when it does not. Pinned to
the handshake era, it answers ``subscriptions/listen`` as an unknown method; pinned modern, it
acknowledges the stream and holds it open, and answers ``ping`` (gone from 2026-07-28) as unknown.
Written on raw JSON lines: the SDK's Python server decides differently."""

from __future__ import annotations

import json
import sys
from typing import Any

from gateway import start_up

start_up.resume()

VERSION = "2026-07-28"
ENVELOPE = "io.modelcontextprotocol/protocolVersion"
PROMPTS = [{"name": "pinned", "description": "served in either era"}]
UNKNOWN = {"error": {"code": -32601, "message": "Method not found"}}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def answer(era: str, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "subscriptions/listen":
        if era != "modern":
            return UNKNOWN
        send(
            {"method": "notifications/subscriptions/acknowledged", "params": {"notifications": params["notifications"]}}
        )
        return None  # held open until the connection ends
    if method == "ping":
        return UNKNOWN if era == "modern" else {"result": {}}
    if method == "prompts/list":
        return {"result": {"prompts": PROMPTS, **({"resultType": "complete"} if era == "modern" else {})}}
    return UNKNOWN


def main() -> None:
    era = "opening"
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        method, params = message["method"], message.get("params") or {}
        if method == "server/discover" and era == "opening":
            era = "probe"
            result = {
                "resultType": "complete",
                "supportedVersions": [VERSION],
                "capabilities": {"prompts": {"listChanged": True}},
            }
            send({"id": message["id"], "result": result})
            continue
        if era in ("opening", "probe"):
            era = "modern" if ENVELOPE in (params.get("_meta") or {}) else "legacy"
        reply = answer(era, method, params)
        if reply is not None:
            send({"id": message["id"], **reply})


if __name__ == "__main__":
    main()
