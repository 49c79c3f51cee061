"""The HTTP client upstream transports use: one httpcore connection pool per upstream, posted to
directly on the hot path (every request to the upstream) and wrapped by httpx for the rest (SSE
streams, resumption, session end), where httpx-sse reads the events.

Two costs found by profiling the gateway's HTTP path (README, performance section) are avoided here:

* httpx's client layer (URL and header merging, cookies, auth and redirect wrappers, its response
  model) on each upstream POST: the pool is called with the few headers a POST needs.
* Before each request httpcore asks every idle pooled connection whether its socket is readable (a
  server that closed it). Through anyio that rebuilt the socket's whole attribute table, including a
  ``getpeername`` system call, per idle connection per request; here each connection keeps its socket
  at hand and the check is one ``poll``.
"""

from __future__ import annotations

import select
import socket
import ssl
from collections.abc import Iterable, Mapping
from typing import Any

import httpcore
import httpx


def _readable(sock: socket.socket | None) -> bool:
    """A readable idle HTTP/1.1 socket is one the server closed (or broke): it must not be reused."""
    if sock is None or sock.fileno() < 0:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class _Stream(httpcore.AsyncNetworkStream):
    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket: socket.socket | None = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return _readable(self._socket)
        return self._inner.get_extra_info(info)


class _Backend(httpcore.AsyncNetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _Transport(httpx.AsyncHTTPTransport):
    """httpx's own transport on a given pool (httpx has no parameter for a network backend)."""

    def __init__(self, pool: httpcore.AsyncConnectionPool) -> None:
        super().__init__(limits=httpx.Limits(max_connections=1, max_keepalive_connections=0))
        self._pool = pool


class UpstreamHttp:
    """One upstream's HTTP client: its configured headers on every request, no redirects (an upstream
    URL is configured, not discovered), connections and requests timed out after ``timeout_s`` while
    response bodies are not (SSE streams stay open; the caller times each request)."""

    def __init__(self, headers: Mapping[str, str], *, timeout_s: float) -> None:
        self.pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=256,
            max_keepalive_connections=64,
            network_backend=_Backend(),
        )
        self.headers = [(name.encode(), value.encode()) for name, value in headers.items()]
        self.timeouts = {"connect": timeout_s, "read": None, "write": timeout_s, "pool": timeout_s}
        self.client = httpx.AsyncClient(
            headers=dict(headers),
            timeout=httpx.Timeout(timeout_s, read=None),
            follow_redirects=False,
            transport=_Transport(self.pool),
        )

    async def __aenter__(self) -> UpstreamHttp:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()
