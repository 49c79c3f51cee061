"""Serve one of the test servers over HTTP: ``python -m tests.servers.http_serve MODULE streamable-http|sse``.

Binds an ephemeral loopback port first and prints it as the first stdout line, so a test waits on that
line (the socket already accepts connections) instead of polling.

``SERVE_REDIRECTS=1`` serves Streamable HTTP at ``/mcp/`` behind the redirects servers send: ``/mcp``
307 (FastMCP's trailing slash), ``/moved`` 308, ``/found`` 302, and ``/elsewhere`` 307 to another
origin (``localhost`` instead of ``127.0.0.1``). ``SERVE_TLS_DIR`` serves HTTPS with the ``server.pem``
and ``server.key`` found there; ``SERVE_CLIENT_CA`` (a CA file) then requires a client certificate it signed.
``SERVE_REQUIRE_ISSUER`` makes it an OAuth protected resource: every request needs a JWT access token from
that issuer (its ``/jwks``) for this server's URL, else 401. ``SERVE_REFUSE_DISCOVER`` answers every
``server/discover`` the way a handshake-era server may (``REFUSALS``: git-mcp-server's HTTP 500 with a
JSON-RPC error among them) and hands everything else to the server. ``SERVE_STATELESS=1`` serves
Streamable HTTP without sessions (no GET stream: the server cannot send a message of its own), declaring
``prompts.listChanged`` all the same, as the TypeScript SDK's stateless serving does.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import ssl
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import uvicorn
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.sse import SseServerTransport
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway import start_up

start_up.resume()


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


def behind_redirects(app: ASGIApp, port: int) -> ASGIApp:
    redirects = {
        "/mcp": (307, "/mcp/"),
        "/moved": (308, "/mcp/"),
        "/found": (302, "/mcp/"),
        "/elsewhere": (307, f"http://localhost:{port}/mcp/"),
    }

    async def routed(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in redirects:
            status, location = redirects[scope["path"]]
            await RedirectResponse(location, status_code=status)(scope, receive, send)
            return
        await app(scope, receive, send)

    return routed


def requiring_tokens(app: ASGIApp, issuer: str, audience: str) -> ASGIApp:
    import jwt

    keys = jwt.PyJWKClient(f"{issuer}/jwks")

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            _, _, token = headers.get(b"authorization", b"").decode().partition(" ")
            try:
                key = await anyio.to_thread.run_sync(keys.get_signing_key_from_jwt, token)
                jwt.decode(token, key.key, algorithms=["RS256"], audience=audience, issuer=issuer)
            except jwt.PyJWTError:
                await Response(status_code=401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded


REFUSALS: dict[str, tuple[int, str, bytes]] = {
    "500-jsonrpc": (500, "application/json", b'{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"boom"}}'),
    "500-text": (500, "text/plain", b"Internal Server Error"),
    "400-jsonrpc": (
        400,
        "application/json",
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}',
    ),
    "404-text": (404, "text/plain", b"Not Found"),
    "200-html": (200, "text/html", b"<html><body>an MCP server lives here</body></html>"),
    "200-header-mismatch": (
        200,
        "application/json",
        b'{"jsonrpc":"2.0","id":ID,"error":{"code":-32020,"message":"Mcp-Method header does not match"}}',
    ),
}
"""How a server may refuse the probe: status, content type, body (``ID`` becomes the request's id)."""


def refusing_discover(app: ASGIApp, refusal: str) -> ASGIApp:
    status, content_type, body = REFUSALS[refusal]

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        received, more = b"", True
        while more:
            message = await receive()
            received += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            request = json.loads(received)
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("method") == "server/discover":
            answer = body.replace(b"ID", json.dumps(request.get("id")).encode())
            await Response(answer, status_code=status, media_type=content_type)(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": received, "more_body": False}

        await app(scope, replay, send)

    return guarded


def tls_options() -> dict[str, Any]:
    if not (directory := os.environ.get("SERVE_TLS_DIR")):
        return {}
    options: dict[str, Any] = {
        "ssl_certfile": str(Path(directory, "server.pem")),
        "ssl_keyfile": str(Path(directory, "server.key")),
    }
    if client_ca := os.environ.get("SERVE_CLIENT_CA"):
        options |= {"ssl_ca_certs": client_ca, "ssl_cert_reqs": ssl.CERT_REQUIRED}
    return options


def main() -> None:
    module, transport = sys.argv[1], sys.argv[2]
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    server: Server = importlib.import_module(f"tests.servers.{module}").server
    redirecting = os.environ.get("SERVE_REDIRECTS") == "1"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY on accept
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    app: ASGIApp
    if transport == "streamable-http":
        if os.environ.get("SERVE_STATELESS") == "1":  # declaring listChanged, as the TypeScript SDK's does
            declared = server.create_initialization_options

            def with_list_changed(notification_options: NotificationOptions | None = None, **rest: Any) -> Any:
                return declared(NotificationOptions(prompts_changed=True), **rest)

            server.create_initialization_options = with_list_changed  # type: ignore[method-assign]
        app = server.streamable_http_app(
            streamable_http_path="/mcp/" if redirecting else "/mcp",
            stateless_http=os.environ.get("SERVE_STATELESS") == "1",
        )
        app = behind_redirects(app, bound) if redirecting else app
    else:
        app = sse_app(server)
    if refusal := os.environ.get("SERVE_REFUSE_DISCOVER"):
        app = refusing_discover(app, refusal)
    if issuer := os.environ.get("SERVE_REQUIRE_ISSUER"):
        app = requiring_tokens(app, issuer, f"http://127.0.0.1:{bound}/mcp")
    print(bound, flush=True)
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on" if transport == "streamable-http" else "off", **tls_options()
    )
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    main()
