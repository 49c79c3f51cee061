"""Who a request comes from, typed: resolved once at the edge (the HTTP front end's guard, or the stdio
front end for the person who launched it) and carried from there to everything keyed by who asks.

A static token named ``ci`` and an access token whose subject is ``ci`` are two identities: they differ
in kind, and access tokens also by issuer. Everything keyed by who (session binding, sealed session
ids, views, fair shares, the audit, Redis messages) goes by :attr:`Identity.key`, which never gives
two kinds, or two issuers' subjects, one string.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

IdentityKind = Literal["token", "oauth", "local", "anonymous"]


@dataclass(frozen=True, slots=True)
class Identity:
    """``token``: a ``[[server.tokens]]`` entry, by name. ``oauth``: an access token's subject under its
    issuer, with its claims (for views; never part of equality). ``local``: the stdio client.
    ``anonymous``: a request over HTTP where the gateway asks for no credentials."""

    kind: IdentityKind
    name: str
    issuer: str | None = None
    claims: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)
    valid_until: float | None = field(default=None, compare=False, hash=False, repr=False)
    """When the credentials this request came with stop being accepted (Unix time: an access token's
    ``exp`` and the leeway the gateway grants it); None for credentials that do not expire. Never part
    of equality: the same person with a fresh token is the same identity."""

    @classmethod
    def token(cls, name: str) -> Identity:
        return cls("token", name)

    @classmethod
    def access_token(
        cls, issuer: str, subject: str, claims: Mapping[str, Any], *, valid_until: float | None = None
    ) -> Identity:
        return cls("oauth", subject, issuer, claims, valid_until)

    @property
    def key(self) -> str:
        """One string per identity: ``token:ci``, ``oauth:["https://idp.example","ci"]``, ``local:stdio``."""
        if self.kind == "oauth":
            return "oauth:" + json.dumps([self.issuer, self.name], ensure_ascii=False, separators=(",", ":"))
        return f"{self.kind}:{self.name}"

    def described(self) -> dict[str, str]:
        """What the audit and the logs say of it: the kind, the name (a subject) and, for OAuth, the issuer."""
        described = {"kind": self.kind, "name": self.name}
        if self.issuer is not None:
            described["issuer"] = self.issuer
        return described


def seconds_left(valid_until: float | None, now: float) -> float | None:
    """How long credentials good until ``valid_until`` are accepted after ``now`` (Unix times; at least
    0), or None for credentials that do not expire."""
    return None if valid_until is None else max(0.0, valid_until - now)


class Grant(NamedTuple):
    """What a valid access token grants: its scopes, and until when it may be relied on (Unix time)."""

    scopes: frozenset[str]
    valid_until: float | None


LOCAL = Identity("local", "stdio")
"""Whoever launched the gateway on stdio (the client process that owns its stdin and stdout)."""


ANONYMOUS = Identity("anonymous", "http")
"""Whoever sends a request over HTTP where the gateway asks for no credentials (no ``[[server.tokens]]``,
no ``[server.auth]``: on loopback only, unless ``allow_unauthenticated``). The front ends carry such a
request's identity as None (every such caller is one and the same); the audit says it as this."""


def key_of(identity: Identity | None) -> str | None:
    return identity.key if identity is not None else None
