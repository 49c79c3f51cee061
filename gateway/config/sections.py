"""What every part of the config builds on: strict frozen sections, the policy rules, the gateway-wide
settings, and the loopback test for where it listens.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

NAMESPACE_PATTERN = r"^[A-Za-z0-9_-]+$"


_SECRET_PATH = re.compile(r"(^|\.)(token|cursor_secrets?|session_keys|redis_url|headers|env|client_secret)(\[|\.|$)")


_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
"""``${VAR}``, ``${VAR:-default}`` (the default where VAR is unset, as a shell and Claude Code have it),
and ``$$`` for a literal ``$``."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PolicyRules(_Section):
    """Glob rules on names and tags; deny wins over allow. An empty ``allow`` list hides everything;
    ``allow_tags`` set: a prompt must also carry one of these tags; ``deny_tags``: none of these."""

    allow: tuple[str, ...] = ("*",)
    deny: tuple[str, ...] = ()
    allow_tags: tuple[str, ...] | None = None
    deny_tags: tuple[str, ...] = ()


class GatewaySettings(_Section):
    namespace_separator: str = Field("__", min_length=1, max_length=8)
    cursor_secret: str | None = Field(None, min_length=16)
    cursor_secrets: tuple[Annotated[str, Field(min_length=16)], ...] = Field((), max_length=16)
    page_size: int | None = Field(None, ge=1, le=10_000)
    max_message_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    list_changed_debounce_s: float = Field(0.05, ge=0, le=10)
    on_upstream_error: Literal["skip", "fail"] = "skip"
    restart_initial_s: float = Field(0.5, gt=0, le=60)
    restart_max_s: float = Field(30.0, gt=0, le=3600)
    max_restarts: int | None = Field(None, ge=0)
    restart_reset_after_s: float = Field(10.0, gt=0, le=86_400)
    max_requests_per_session: int = Field(256, ge=1, le=100_000)
    max_requests_per_upstream: int = Field(256, ge=1, le=100_000)
    shutdown_grace_s: float = Field(10.0, ge=0, le=600)
    list_ttl_s: float = Field(60.0, ge=0, le=86_400)
    startup_wait_s: float = Field(5.0, ge=0, le=60)

    @field_validator("namespace_separator")
    @classmethod
    def _printable(cls, value: str) -> str:
        if not value.isprintable() or value.strip() != value:
            raise ValueError("must be printable with no surrounding whitespace")
        return value

    @model_validator(mode="after")
    def _one_way_to_name_cursor_secrets(self) -> GatewaySettings:
        if self.cursor_secret is not None and self.cursor_secrets:
            raise ValueError(
                "set cursor_secret or cursor_secrets, not both (cursor_secrets: the first seals, all open)"
            )
        return self

    @property
    def cursor_keys(self) -> tuple[bytes, ...]:
        """The configured cursor secrets, the sealing one first; empty when none is configured."""
        if self.cursor_secret is not None:
            return (self.cursor_secret.encode(),)
        return tuple(secret.encode() for secret in self.cursor_secrets)


def is_loopback(host: str) -> bool:
    """Whether an address to bind is reachable from this machine only: ``localhost``, all of 127.0.0.0/8
    and ``::1`` (bracketed or not)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False
