"""``[server.admin]``: the operator page on the HTTP front end (docs/operations.md#the-operator-page)."""

from __future__ import annotations

from pydantic import Field

from gateway.config.sections import _Section


class AdminSettings(_Section):
    """Off by default. Without ``token`` it answers loopback clients only; with one, whoever presents it
    (a browser signs in once with it, kept in an HttpOnly cookie)."""

    enabled: bool = False
    path: str = Field("/admin", pattern=r"^/[A-Za-z0-9/_.-]*[A-Za-z0-9_-]$")
    token: str | None = Field(None, min_length=16)
    recent_audit_events: int = Field(200, ge=0, le=10_000)
