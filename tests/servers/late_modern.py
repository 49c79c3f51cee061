"""A 2026-07-28-only server that is slow to start (as one of fifty starting together on two cores): it
reads nothing for ``LATE_S`` seconds, then answers ``server/discover``, refuses ``initialize`` with the
unsupported-version error, and serves one prompt. Written on raw JSON lines for control of the timing.
``DIE_ON_FIRST_PROBE`` names a file: while it does not exist, a start makes it and dies on the probe."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from gateway import start_up

start_up.resume()

VERSION = "2026-07-28"


def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "server/discover":
        capabilities = {"prompts": {}}
        return {"result": {"resultType": "complete", "supportedVersions": [VERSION], "capabilities": capabilities}}
    if method == "initialize":
        data = {"supported": [VERSION], "requested": params.get("protocolVersion")}
        return {"error": {"code": -32022, "message": "the initialize handshake is not accepted", "data": data}}
    if method == "prompts/list":
        return {"result": {"resultType": "complete", "prompts": [{"name": "late"}], "ttlMs": 0, "cacheScope": "public"}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


def main() -> None:
    died = os.environ.get("DIE_ON_FIRST_PROBE")  # a file: absent, this start dies on the probe (and makes it)
    if died is not None and not os.path.exists(died):
        open(died, "w").close()  # (a marker)
        sys.stdin.readline()
        sys.exit(1)
    time.sleep(float(os.environ.get("LATE_S", "3")))
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message and "method" in message:
            reply = answer(message["method"], message.get("params") or {})
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
