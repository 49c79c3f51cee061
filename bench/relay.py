"""The floor of the gateway's own stack: a bare relay built from exactly the libraries the gateway serves
and asks with (uvicorn with httptools and uvloop, and one aiohttp session made by the gateway's
``upstream_session``), and nothing else: no routing, no policy, no audit, no JSON read or written.

It POSTs each request's body to the upstream and hands the answer back as it came. Measured beside the
gateway in the ``gets`` section, its CPU per request is the least any gateway on these libraries could
spend; the difference to the gateway's is what the gateway's own work costs.

Usage: ``python -m bench.relay UPSTREAM_URL``; prints its port first.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import aiohttp
import anyio
import uvicorn
from yarl import URL

from gateway.transports.http_options import HttpOptions, upstream_session

_FORWARDED = (b"content-type", b"accept", b"mcp-protocol-version", b"mcp-session-id", b"mcp-method", b"mcp-name")


class Relay:
    """An ASGI app relaying every POST to one upstream URL."""

    def __init__(self, upstream: str) -> None:
        self._url = URL(upstream)
        self._session: aiohttp.ClientSession | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers = {name.decode(): value.decode() for name, value in scope["headers"] if name in _FORWARDED}
        status, kept, answer = await self.ask(body, headers)
        await send({"type": "http.response.start", "status": status, "headers": kept})
        await send({"type": "http.response.body", "body": answer})

    async def ask(self, body: bytes, headers: dict[str, str]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """The upstream's answer to one POST: its status, the headers handed back, its body."""
        assert self._session is not None
        async with self._session.post(self._url, data=body, headers=headers) as response:
            answer = await response.read()
            kept = [(b"content-type", response.headers.get("content-type", "application/json").encode())]
            if "mcp-session-id" in response.headers:
                kept.append((b"mcp-session-id", response.headers["mcp-session-id"].encode()))
            status = response.status
        kept.append((b"content-length", str(len(answer)).encode()))
        return status, kept, answer

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._session = upstream_session(str(self._url), HttpOptions(proxy="none"))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._session is not None:
                    await self._session.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def serve(app: Relay) -> None:
    """Serve ``app`` on a free loopback port, printed first, as the gateway is served."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(
        app, log_level="error", lifespan="on", http="httptools", loop="uvloop", ws="none",
        access_log=False, server_header=False, proxy_headers=False,
    )  # fmt: skip
    anyio.run(uvicorn.Server(config).serve, [sock], backend_options={"use_uvloop": True})


def main() -> None:
    serve(Relay(sys.argv[1]))


if __name__ == "__main__":
    main()
