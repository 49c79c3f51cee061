"""How the gateway's HTTP client reaches one upstream: proxy, TLS, time-outs, redirects.

Every upstream request (POSTs, GET streams, DELETE, legacy SSE) goes through one aiohttp
``ClientSession`` per upstream, built here from the upstream's options. aiohttp was chosen by
measurement: through the gateway at 16 requests in flight it costs about a tenth more gateway CPU per
request than the hand-made client it replaced, httpx about 2.7 times as much (its pool asks every idle
connection's socket whether it was closed, on every request).

Proxies: the configured one, or the environment's the way curl reads it (``HTTP_PROXY``,
``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``; the standard library's reading of them), or none. Only
the proxy settings are taken from the environment: no credentials from ``~/.netrc``.

Redirects are followed the way the official SDK clients follow them (FastMCP answers ``POST /mcp``
with 307 to ``/mcp/``), with two limits a gateway needs and a browser does not: never to another
origin (the configured headers, often credentials, would go along), and never one that turns a POST
into a GET (301/302/303: the JSON-RPC body would be dropped).
"""

from __future__ import annotations

import ssl
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field

import aiohttp
from yarl import URL


@dataclass(frozen=True)
class HttpOptions:
    """One upstream's client settings. ``proxy`` None means "from the environment", ``"none"`` means
    "connect directly"; ``read_timeout_s`` None means a read may wait as long as the request's deadline
    (SSE streams stay open while idle)."""

    timeout_s: float = 30.0
    headers: Mapping[str, str] = field(default_factory=dict)
    connect_timeout_s: float = 10.0
    read_timeout_s: float | None = None
    proxy: str | None = None
    verify: bool = True
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None


IDLE_CONNECTION_S = 4.0
"""How long an idle connection is kept for reuse: below uvicorn's 5 s keep-alive (the server of most
Python MCP servers), so the gateway drops an idle connection before the server does, rather than
sending a request down one the server is closing."""


class RedirectRefused(aiohttp.ClientError):
    """The upstream redirected somewhere the gateway will not follow; the message says where and why."""


HTTP_ERRORS = (aiohttp.ClientError, TimeoutError)
"""What a failed upstream HTTP request raises (aiohttp's time-outs are TimeoutErrors too)."""


def describe(exc: BaseException) -> str:
    """A failed request for a log line or a JSON-RPC error: its kind and, when it has one, what it says."""
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _tls(options: HttpOptions) -> ssl.SSLContext | bool:
    if not options.verify:
        return False
    if options.ca_file is None and options.client_cert is None:
        return True  # the system's trust store (SSL_CERT_FILE / SSL_CERT_DIR apply)
    context = ssl.create_default_context(cafile=options.ca_file)
    if options.client_cert is not None:
        context.load_cert_chain(options.client_cert, options.client_key)
    return context


def proxy_for(url: str, configured: str | None) -> str | None:
    """The proxy a request to ``url`` goes through: the configured one, else the environment's."""
    if configured == "none":
        return None
    if configured is not None:
        return configured
    target = URL(url)
    if target.host is None or urllib.request.proxy_bypass(target.host):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(target.scheme) or proxies.get("all")


def _origin(url: URL) -> tuple[str, str | None, int | None]:
    return url.scheme, url.host, url.port


async def _refuse_unsafe_redirects(
    request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
) -> aiohttp.ClientResponse:
    """A client middleware: aiohttp runs it for every hop, so it sees each redirect before it is followed."""
    response = await handler(request)
    location = response.headers.get("Location")
    if response.status in (301, 302, 303, 307, 308) and location is not None:
        target = request.url.join(URL(location))
        if _origin(target) != _origin(request.url):
            response.close()
            raise RedirectRefused(f"redirected to another origin ({target}); configure that URL instead")
        if request.method != "GET" and response.status not in (307, 308):
            response.close()
            raise RedirectRefused(
                f"answered HTTP {response.status} to a {request.method}, which would resend it as a GET "
                f"without its body; only 307 and 308 keep it (location {target})"
            )
    return response


def upstream_session(url: str, options: HttpOptions) -> aiohttp.ClientSession:
    """The client for one upstream. Bodies are never timed out by default (SSE streams stay open; the
    caller times each request); the pool is not bounded here, since the gateway bounds the requests in
    flight to each upstream itself (``max_requests_per_upstream``)."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ssl=_tls(options), keepalive_timeout=IDLE_CONNECTION_S),
        headers=dict(options.headers),
        timeout=aiohttp.ClientTimeout(total=None, connect=options.connect_timeout_s, sock_read=options.read_timeout_s),
        proxy=proxy_for(url, options.proxy),
        trust_env=False,  # the proxy was decided above; nothing else (no ~/.netrc) comes from the environment
        middlewares=(_refuse_unsafe_redirects,),
    )
