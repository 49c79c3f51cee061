"""What an upstream's settings become before anything is opened: its HTTP client options, the gateway's
own token for it, the variables of its ``env_file``, its URL as it may be logged, and how its trace spans
name it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from gateway import __version__
from gateway.config import HttpUpstream, StdioUpstream
from gateway.observability.tracing import Destination
from gateway.rpc import RemoteError
from gateway.transports.base import HTTP_STATUS_DATA_KEY

if TYPE_CHECKING:
    from gateway.transports.client_credentials import UpstreamToken
    from gateway.transports.http_options import HttpOptions
from gateway.protocol.errors import (
    UpstreamUnavailable,
)

CLIENT_INFO = {"name": "mcp-prompt-gateway", "version": __version__}


def _upstream_token(settings: StdioUpstream | HttpUpstream) -> UpstreamToken | None:
    """The gateway's own token for an upstream that asks for one (``oauth``), kept across reconnects."""
    if not isinstance(settings, HttpUpstream) or settings.oauth is None:
        return None
    from gateway.transports.client_credentials import ClientCredentialsGrant, UpstreamToken

    oauth = settings.oauth
    grant = ClientCredentialsGrant(
        token_url=oauth.token_url,
        client_id=oauth.client_id,
        client_secret=oauth.client_secret,
        resource=oauth.resource or settings.url,
        scope=oauth.scope,
    )
    return UpstreamToken(grant, _http_options(settings))


def _env_file(settings: StdioUpstream) -> dict[str, str]:
    """The variables of the upstream's ``env_file`` (dotenv syntax, read by python-dotenv), read anew at
    each start so an edited file takes effect with the next restart."""
    if settings.env_file is None:
        return {}
    from dotenv import dotenv_values

    try:
        with open(settings.env_file, encoding="utf-8") as source:
            values = dotenv_values(stream=source)
    except OSError as exc:
        raise UpstreamUnavailable(
            settings.namespace, f"cannot read its env_file {settings.env_file}: {exc.strerror}"
        ) from exc
    return {key: value for key, value in values.items() if value is not None}


def _http_options(settings: HttpUpstream) -> HttpOptions:
    from gateway.transports.http_options import HttpOptions

    return HttpOptions(
        timeout_s=settings.timeout_s,
        headers=settings.headers,
        connect_timeout_s=settings.connect_timeout_s,
        read_timeout_s=settings.read_timeout_s,
        proxy=settings.proxy,
        verify=settings.verify,
        ca_file=settings.ca_file,
        client_cert=settings.client_cert,
        client_key=settings.client_key,
    )


def http_status(exc: RemoteError) -> int | None:
    """The HTTP status an error stands for, when the transport made it from one (the server, or a proxy
    before it, answered with a status instead of JSON-RPC): then it is down, not refusing."""
    data = exc.error.get("data")
    status = data.get(HTTP_STATUS_DATA_KEY) if isinstance(data, dict) else None
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def destination_of(settings: StdioUpstream | HttpUpstream) -> Destination:
    """The upstream as its CLIENT spans name it: a pipe, or the host and port of its URL, spoken to in
    HTTP/1.1 (the only version aiohttp's client speaks)."""
    if isinstance(settings, StdioUpstream):
        return Destination(settings.namespace, "pipe")
    parts = urlsplit(settings.url)
    port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    return Destination(settings.namespace, "tcp", parts.hostname, port, protocol_version="1.1")


_DEFAULT_PORTS = {"http": 80, "https": 443}
