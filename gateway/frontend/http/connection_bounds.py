"""How many HTTP connections the gateway holds, in all and per client address, and how large and slow a
request's header block and body may be (``ConnectionBounds``, from ``[server]``); and the answer that
refuses a connection or a request before the application sees it. The connection guard
(``connection_guard.py``) applies them to every connection.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConnectionBounds:
    max_connections: int
    max_connections_per_client: int
    max_header_bytes: int
    header_timeout_s: float
    body_timeout_s: float
    max_body_bytes: int = 1 << 62
    """A request's bytes after its header block (its body, a chunked one's framing and trailers): the
    application bounds a body it reads, but a chunked request's trailers reach the server's parser, which
    keeps them, with no bound but this (the gateway: twice ``max_message_bytes`` and a header block)."""


class ConnectionCounter:
    """Open connections, in all and per client address, shared by every connection of one server."""

    def __init__(self) -> None:
        self.total = 0
        self.per_address: Counter[str] = Counter()

    def admit(self, address: str, bounds: ConnectionBounds) -> str | None:
        """Count the connection in, or say which bound refuses it."""
        if self.total >= bounds.max_connections:
            return f"the gateway has {bounds.max_connections} connections open"
        if self.per_address[address] >= bounds.max_connections_per_client:
            return f"{bounds.max_connections_per_client} connections are open from this address"
        self.total += 1
        self.per_address[address] += 1
        return None

    def release(self, address: str) -> None:
        self.total -= 1
        self.per_address[address] -= 1
        if self.per_address[address] <= 0:
            del self.per_address[address]


def refusal(status: int, reason: str, message: str, **headers: str) -> bytes:
    """A whole HTTP/1.1 response that closes the connection, its body a JSON-RPC error without an id
    (as the front end's own refusals are)."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    head = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json", f"Content-Length: {len(body)}"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body
