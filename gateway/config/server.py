"""``[server]``: how clients reach the gateway, the tokens and OAuth issuers it accepts, the views people
get from their claims, the audit, and every bound on what clients may hold.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    Field,
    model_validator,
)

from gateway.config.admin import AdminSettings
from gateway.config.limits import Rate
from gateway.config.sections import NAMESPACE_PATTERN, PolicyRules, _Section, is_loopback


class TokenSettings(_Section):
    """A front-end bearer token; its policy applies on top of the global one for the clients using it."""

    name: str = Field(pattern=NAMESPACE_PATTERN, max_length=64)
    token: str = Field(min_length=16)
    policy: PolicyRules = PolicyRules()
    rate: Rate | None = None
    """This token's own rate, in place of ``[limits] rate``."""


ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


class Introspection(_Section):
    """Opaque (non-JWT) access tokens, asked about at the issuer's introspection endpoint (RFC 7662) with
    the gateway's own client credentials; ``endpoint`` unset: the one the issuer's metadata names."""

    client_id: str = Field(min_length=1)
    client_secret: str = Field(min_length=1)
    endpoint: str | None = Field(None, pattern=r"^https?://")


class IssuerSettings(_Section):
    """An authorization server whose access tokens the gateway accepts: JWTs, checked against its keys
    (found by discovery, RFC 8414 then OpenID Connect, unless ``jwks_uri`` names them), and with
    ``introspection`` opaque tokens too."""

    issuer: str = Field(pattern=r"^https?://")
    audience: tuple[str, ...] = ()
    jwks_uri: str | None = Field(None, pattern=r"^https?://")
    introspection: Introspection | None = None
    algorithms: tuple[Literal[ASYMMETRIC_ALGORITHMS], ...] = Field(("RS256", "PS256", "ES256", "EdDSA"), min_length=1)  # type: ignore[valid-type]


class AuthSettings(_Section):
    """The HTTP front end as an OAuth 2.1 resource server (MCP authorization). ``resource`` is the MCP
    endpoint's public URL: tokens must be issued for it (their ``aud``, RFC 8707), and the protected
    resource metadata (RFC 9728) names it."""

    resource: str = Field(pattern=r"^https?://[^#]+$")
    issuers: tuple[IssuerSettings, ...] = Field(min_length=1)
    scopes_required: tuple[str, ...] = ()
    scopes_supported: tuple[str, ...] = ()
    leeway_s: float = Field(30.0, ge=0, le=300)
    jwks_refresh_min_s: float = Field(60.0, ge=0, le=86_400)


class ClaimMatch(_Section):
    """Which tokens a view applies to: ``claim`` (a dotted path into the token) holding any of ``any_of``,
    none of ``none_of``, or a string ending with ``ends_with`` (an e-mail domain). A string claim is one
    value (``scope`` and ``scp`` are split on spaces); an array, its strings."""

    claim: str = Field(pattern=r"^[A-Za-z0-9_:/.-]+$", max_length=256)
    any_of: tuple[str, ...] = ()
    none_of: tuple[str, ...] = ()
    ends_with: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one_test(self) -> ClaimMatch:
        tests = [bool(self.any_of), bool(self.none_of), self.ends_with is not None]
        if sum(tests) != 1:
            raise ValueError("give exactly one of any_of, none_of, ends_with")
        return self


class ViewSettings(_Section):
    """A policy for the people whose token matches: it narrows the global policy (deny wins)."""

    name: str = Field(pattern=NAMESPACE_PATTERN, max_length=64)
    match: ClaimMatch
    policy: PolicyRules
    rate: Rate | None = None
    """The rate of each person this view matches, in place of ``[limits] rate`` (the first view with one)."""


class AuditSettings(_Section):
    """One ``audit`` event per get, completion and refused request: to the log, or to a JSONL file."""

    file: str | None = None
    argument_values: bool = False


def _proxy_address(value: str) -> str:
    if value != "*":
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError as exc:
            raise ValueError(f'{value!r} is not an IP address, a network ("10.0.0.0/8") or "*"') from exc
    return value


ProxyAddress = Annotated[str, AfterValidator(_proxy_address)]


class ServerSettings(_Section):
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    path: str = Field("/mcp", pattern=r"^/[A-Za-z0-9/_.-]*$")
    sse_path: str = Field("/sse", pattern=r"^/[A-Za-z0-9/_.-]*$")
    messages_path: str = Field("/messages", pattern=r"^/[A-Za-z0-9/_.-]*$")
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    trusted_proxies: tuple[ProxyAddress, ...] = ()
    """Reverse proxies whose ``X-Forwarded-Proto`` and ``X-Forwarded-For`` are believed (the scheme and
    client address they name replace the connection's); from anyone else, and when empty, ignored."""
    tokens: tuple[TokenSettings, ...] = ()
    auth: AuthSettings | None = None
    views: tuple[ViewSettings, ...] = ()
    audit: AuditSettings = AuditSettings()
    admin: AdminSettings = AdminSettings()
    prompts_as_tools: bool = False
    allow_unauthenticated: bool = False
    max_sessions: int = Field(10_000, ge=1)
    max_sessions_per_identity: int | None = Field(None, ge=1)
    session_idle_timeout_s: float = Field(3600, gt=0)
    max_connections: int = Field(1000, ge=1)
    max_connections_per_client: int = Field(250, ge=1)
    max_header_bytes: int = Field(64 * 1024, ge=1024, le=16 * 1024 * 1024)
    header_timeout_s: float = Field(10.0, gt=0, le=3600)
    body_timeout_s: float = Field(30.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _views_need_tokens_to_look_at(self) -> ServerSettings:
        if self.views and self.auth is None:
            raise ValueError("server.views match token claims: configure [server.auth] issuers too")
        if len({v.name for v in self.views}) != len(self.views):
            raise ValueError("server.views: view names must be unique")
        return self

    @model_validator(mode="after")
    def _admin_scope_needs_access_tokens(self) -> ServerSettings:
        if self.admin.scope is not None and self.auth is None:
            raise ValueError("server.admin.scope is read from access tokens: configure [server.auth] issuers too")
        return self

    @model_validator(mode="after")
    def _tokens_are_distinct(self) -> ServerSettings:
        names = [t.name for t in self.tokens]
        if len(set(names)) != len(names):
            raise ValueError("server.tokens: token names must be unique")
        if len({t.token for t in self.tokens}) != len(self.tokens):
            raise ValueError("server.tokens: two tokens have the same value")
        return self

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)
