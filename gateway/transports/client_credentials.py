"""The gateway's own access token for an upstream that is an OAuth protected resource: fetched by the
client credentials grant, kept until shortly before it expires, fetched again after a 401.

A client's token is never forwarded upstream (it was issued for the gateway, not for the upstream);
the gateway authenticates as itself, with credentials from its config.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import aiohttp
import anyio
import structlog

from gateway.transports.http_options import HTTP_ERRORS, HttpOptions, describe, upstream_session

log = structlog.get_logger("gateway.upstream.oauth")

REFRESH_BEFORE_S = 30.0
"""A token is renewed this long before it expires, so no request goes out with one about to lapse."""
DEFAULT_LIFETIME_S = 300.0
MAX_TOKEN_RESPONSE_BYTES = 64 * 1024


class TokenUnavailable(Exception):
    """The token endpoint did not give a token; the message says what it answered (never the secret)."""


@dataclass(frozen=True)
class ClientCredentialsGrant:
    token_url: str
    client_id: str
    client_secret: str
    resource: str
    scope: str | None = None


class UpstreamToken:
    def __init__(self, grant: ClientCredentialsGrant, options: HttpOptions) -> None:
        self._grant = grant
        self._options = options
        self._token: str | None = None
        self._renew_at = 0.0
        self._lock = anyio.Lock()

    async def authorization(self) -> str:
        """``Bearer <token>``, fetched when there is none or it is about to expire."""
        async with self._lock:
            if self._token is None or time.monotonic() >= self._renew_at:
                await self._fetch()
            assert self._token is not None  # noqa: S101 - set by _fetch or it raised
            return f"Bearer {self._token}"

    def rejected(self, presented: str) -> None:
        """The upstream answered 401 to ``presented``: the next request fetches a new token."""
        if presented == f"Bearer {self._token}":
            self._token = None

    async def _fetch(self) -> None:
        form = {"grant_type": "client_credentials", "resource": self._grant.resource}
        if self._grant.scope:
            form["scope"] = self._grant.scope
        auth = aiohttp.BasicAuth(self._grant.client_id, self._grant.client_secret)
        try:
            async with (
                upstream_session(self._grant.token_url, self._options) as http,
                http.post(self._grant.token_url, data=form, auth=auth) as response,
            ):
                body = await response.content.read(MAX_TOKEN_RESPONSE_BYTES)
                status = response.status
        except HTTP_ERRORS as exc:
            raise TokenUnavailable(f"token endpoint {self._grant.token_url}: {describe(exc)}") from exc
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if status != 200 or not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
            error = answer.get("error") if isinstance(answer, dict) else None
            raise TokenUnavailable(
                f"token endpoint {self._grant.token_url} answered HTTP {status} ({error or 'no token'})"
            )
        lifetime = answer.get("expires_in")
        seconds = float(lifetime) if isinstance(lifetime, (int, float)) and lifetime > 0 else DEFAULT_LIFETIME_S
        self._token = answer["access_token"]
        self._renew_at = time.monotonic() + max(seconds - REFRESH_BEFORE_S, seconds / 2)
        log.info("upstream_token_fetched", token_url=self._grant.token_url, expires_in_s=round(seconds))
