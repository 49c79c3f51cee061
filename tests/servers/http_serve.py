"""Serve one of the test servers over HTTP: ``python -m tests.servers.http_serve MODULE streamable-http|sse``.

Binds an ephemeral loopback port first and prints it as the first stdout line, so a test waits on that
line (the socket already accepts connections) instead of polling.
"""

from __future__ import annotations

import importlib
import socket
import sys

import anyio
import uvicorn
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.sse import SseServerTransport
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route


def sse_app(server: Server) -> Starlette:
    transport = SseServerTransport("/messages/")

    async def handle_sse(request: Request) -> Response:
        async with transport.connect_sse(request.scope, request.receive, request._send) as (read, write):
            options = server.create_initialization_options(NotificationOptions(prompts_changed=True))
            await server.run(read, write, options)
        return Response()

    return Starlette(
        routes=[Route("/sse", handle_sse, methods=["GET"]), Mount("/messages/", app=transport.handle_post_message)]
    )


def main() -> None:
    module, transport = sys.argv[1], sys.argv[2]
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    server: Server = importlib.import_module(f"tests.servers.{module}").server
    app = server.streamable_http_app(streamable_http_path="/mcp") if transport == "streamable-http" else sse_app(server)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY on accept
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on" if transport == "streamable-http" else "off")
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    main()
