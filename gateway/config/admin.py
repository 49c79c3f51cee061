"""``[server.admin]``: the operator page on the HTTP front end (docs/operations.md#the-operator-page)."""

from __future__ import annotations

from pydantic import Field

from gateway.config.limits import Rate
from gateway.config.sections import _Section


class AdminSettings(_Section):
    """Off by default. Without ``token`` or ``scope`` it answers loopback clients only; with a token,
    whoever presents it (a browser signs in once with it, kept in an HttpOnly cookie); with a scope,
    whoever presents an access token carrying it (``[server.auth]``)."""

    enabled: bool = False
    path: str = Field("/admin", pattern=r"^/[A-Za-z0-9/_.-]*[A-Za-z0-9_-]$")
    token: str | None = Field(None, min_length=16)
    scope: str | None = Field(None, min_length=1, max_length=128, pattern=r"^[\x21\x23-\x5b\x5d-\x7e]+$")
    """An OAuth scope, such as ``prompts:admin``, that an access token must carry to see the page."""
    recent_audit_events: int = Field(200, ge=0, le=10_000)
    sign_in_failures: Rate = "10/minute"
    """How many wrong tokens one client address may send the sign-in form (a ``limits`` rate); past
    it every sign-in from that address is answered 429 until the window moves on."""
