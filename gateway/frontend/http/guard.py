"""The guard every HTTP request passes before anything else: Host and Origin validation (DNS rebinding),
then the bearer token, compared in constant time with every static token, else checked as an OAuth
access token. Its answer is a typed identity, or the refusal (with the identity where it is known).
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from functools import lru_cache, partial
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import structlog
import structlog.contextvars
from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from gateway.config import ServerSettings, TokenSettings
from gateway.identity.principal import Grant, Identity
from gateway.identity.protected_resource import challenge

if TYPE_CHECKING:
    from gateway.identity.access_tokens import AccessTokenValidator
from gateway.frontend.http.messages import (
    bearer_token,
    headers_of,
    plain,
)

log = structlog.get_logger("gateway.http")


_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def _host_port(value: str, default_scheme: str = "") -> tuple[str, str, str | None]:
    parts = urlsplit(value if "://" in value else f"{default_scheme or 'http'}://{value}")
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = str(parts.port) if parts.port is not None else None
    except ValueError:
        port = "invalid"
    return parts.scheme.lower(), host, port


def _matches(value: str, patterns: Sequence[str], *, with_scheme: bool) -> bool:
    """``http://localhost:*`` style patterns: scheme and host exact, port exact or ``*``."""
    scheme, host, port = _host_port(value)
    for pattern in patterns:
        p_scheme, p_host, p_port = _host_port(pattern.replace(":*", ":1"))
        if (with_scheme and scheme != p_scheme) or host != p_host:
            continue
        if pattern.endswith(":*") or p_port == port:
            return True
    return False


class Guard:
    """DNS-rebinding protection and authentication, applied to every request before anything else."""

    def __init__(self, settings: ServerSettings) -> None:
        loopback_origins = [f"{s}://{h}:*" for s in ("http", "https") for h in _LOOPBACK_NAMES]
        loopback_origins += [f"{s}://{h}" for s in ("http", "https") for h in _LOOPBACK_NAMES]
        self._origins = [*loopback_origins, *settings.allowed_origins]
        hosts = list(settings.allowed_hosts)
        if not hosts and settings.loopback:  # and the address bound, which may be any of 127.0.0.0/8
            names = dict.fromkeys([*_LOOPBACK_NAMES, f"[{settings.host}]" if ":" in settings.host else settings.host])
            hosts = [f"{h}:*" for h in names] + list(names)
        self._hosts = hosts
        self._tokens: tuple[TokenSettings, ...] = settings.tokens
        self._auth = settings.auth
        self._validator: AccessTokenValidator | None = None
        if settings.auth is not None:  # JOSE and the HTTP client load only where tokens are checked
            from gateway.identity.access_tokens import AccessTokenValidator

            self._validator = AccessTokenValidator(settings.auth)
        # Every request asks the same one or two questions: the answers are kept (bounded: the values
        # come from clients) instead of parsing URLs per request.
        self._host_allowed = lru_cache(maxsize=256)(partial(_matches, patterns=hosts, with_scheme=False))
        self._origin_allowed = lru_cache(maxsize=256)(partial(_matches, patterns=self._origins, with_scheme=True))

    def host_refusal(self, request: HttpRequest) -> Response | None:
        """421 for a Host header this front end does not answer to (DNS rebinding), else None."""
        host = headers_of(request).get("host", "")
        if self._hosts and not self._host_allowed(host):
            return plain(421, f"Invalid Host header: {host!r}")
        return None

    async def check(self, request: HttpRequest) -> tuple[Identity | None, Response | None]:
        """(identity, None) when the request may proceed, else (the identity if one is known, the refusal)."""
        refused = self.host_refusal(request)
        if refused is not None:
            return None, refused
        origin = headers_of(request).get("origin")
        if origin is not None and not self._origin_allowed(origin):
            return None, plain(403, f"Forbidden: Origin {origin!r} is not allowed")
        if not self._tokens and self._auth is None:
            return None, None
        candidate = bearer_token(headers_of(request).get("authorization"))
        if not candidate:
            return None, self._unauthorized("Unauthorized: a bearer token is required", None)
        name = None
        for token in self._tokens:  # every token is compared, so timing says nothing about which matched
            if hmac.compare_digest(candidate.encode(), token.token.encode()):
                name = token.name
        if name is not None:
            return Identity.token(name), None
        if self._validator is None:
            return None, self._unauthorized("Unauthorized: invalid token", "invalid_token")
        return await self._check_access_token(candidate)

    async def _check_access_token(self, token: str) -> tuple[Identity | None, Response | None]:
        from gateway.identity.access_tokens import IssuerUnavailable, TokenRejected

        assert self._validator is not None  # noqa: S101 - only with [server.auth]
        assert self._auth is not None  # noqa: S101
        try:
            access = await self._validator.validate(token)
        except TokenRejected as exc:
            log.info("token_rejected", reason=str(exc))
            return None, self._unauthorized(f"Unauthorized: invalid token: {exc}", "invalid_token", str(exc))
        except IssuerUnavailable as exc:
            log.warning("issuer_unavailable", error=str(exc))
            unreachable = "Service Unavailable: the token's issuer cannot be reached"
            return None, plain(503, unreachable, **{"Retry-After": "5"})
        until = self._validator.valid_until(access)
        identity = Identity.access_token(access.issuer, access.subject, access.claims, valid_until=until)
        missing = [scope for scope in self._auth.scopes_required if scope not in access.scopes]
        if missing:  # known but refused: the identity goes with the refusal, to the audit
            reason = f"the token lacks the scope {' '.join(missing)}"
            header = challenge(self._auth, error="insufficient_scope", description=reason)
            return identity, plain(403, f"Forbidden: {reason}", **{"WWW-Authenticate": header})
        return identity, None

    async def grant_of(self, token: str) -> Grant | None:
        """The scopes of a valid access token and until when it holds (None: not one, or no
        ``[server.auth]``): the operator page's ``scope`` is checked with the same validator, keys and
        cache as every request, and its event stream ends with the token."""
        if self._validator is None:
            return None
        from gateway.identity.access_tokens import IssuerUnavailable, TokenRejected

        try:
            access = await self._validator.validate(token)
        except (TokenRejected, IssuerUnavailable):
            return None
        return Grant(access.scopes, self._validator.valid_until(access))

    def _unauthorized(self, message: str, error: str | None, description: str | None = None) -> Response:
        if self._auth is not None:
            header = challenge(self._auth, error=error, description=description)
        else:
            header = 'Bearer realm="mcp-prompt-gateway"' + (f', error="{error}"' if error else "")
        return plain(401, message, **{"WWW-Authenticate": header})
