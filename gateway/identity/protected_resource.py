"""The HTTP front end as an OAuth 2.1 protected resource (MCP authorization, RFC 9728, RFC 6750):
where its metadata lives, what the metadata says, and the ``WWW-Authenticate`` challenges that point
clients to it. Sans-IO: strings and dicts in, strings and dicts out."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gateway.config import AuthSettings

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def metadata_paths(resource: str) -> list[str]:
    """RFC 9728 inserts the well-known segment before the resource's path (``/.well-known/
    oauth-protected-resource/mcp``); clients of earlier revisions ask at the root. Both are served."""
    path = urlsplit(resource).path.rstrip("/")
    return [f"{WELL_KNOWN}{path}", WELL_KNOWN] if path else [WELL_KNOWN]


def metadata_url(resource: str) -> str:
    parts = urlsplit(resource)
    return urlunsplit((parts.scheme, parts.netloc, metadata_paths(resource)[0], "", ""))


def metadata_document(settings: AuthSettings) -> dict[str, Any]:
    document: dict[str, Any] = {
        "resource": settings.resource,
        "authorization_servers": [issuer.issuer for issuer in settings.issuers],
        "bearer_methods_supported": ["header"],
        "resource_name": "MCP prompt gateway",
    }
    scopes = list(dict.fromkeys([*settings.scopes_supported, *settings.scopes_required]))
    if scopes:
        document["scopes_supported"] = scopes
    return document


def _quoted(text: str) -> str:
    """An auth-param value: printable ASCII without quote or backslash (RFC 6750's error_description)."""
    return "".join(c for c in text if " " <= c <= "~" and c not in '"\\')[:300]


def challenge(settings: AuthSettings, *, error: str | None = None, description: str | None = None) -> str:
    """``Bearer resource_metadata="…"`` with ``scope`` where scopes are required, and the error when
    there is one (``invalid_token``, ``insufficient_scope``)."""
    params = []
    if error is not None:
        params.append(f'error="{error}"')
        if description:
            params.append(f'error_description="{_quoted(description)}"')
    params.append(f'resource_metadata="{metadata_url(settings.resource)}"')
    if settings.scopes_required:
        params.append(f'scope="{_quoted(" ".join(settings.scopes_required))}"')
    return "Bearer " + ", ".join(params)
