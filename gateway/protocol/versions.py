"""The MCP revisions the gateway speaks, and what changed between them that a prompt proxy must honour."""

from __future__ import annotations

HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""Revisions negotiated with ``initialize``, oldest first. Ordering questions go through this tuple,
never through string comparison: revision names are identifiers, not numbers."""

LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[-1]

MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
"""Stateless revisions: every request carries its version and capabilities in ``_meta``; no handshake."""

LATEST_MODERN_VERSION = MODERN_VERSIONS[-1]

ALL_VERSIONS: tuple[str, ...] = (*HANDSHAKE_VERSIONS, *MODERN_VERSIONS)


def negotiate(requested: object) -> str:
    """Answer the client's revision when we speak it, else our newest (the client may then hang up)."""
    if isinstance(requested, str) and requested in HANDSHAKE_VERSIONS:
        return requested
    return LATEST_HANDSHAKE_VERSION


def at_least(version: str, minimum: str) -> bool:
    """Whether ``version`` is ``minimum`` or newer; an unknown revision is treated as the oldest."""
    try:
        return ALL_VERSIONS.index(version) >= ALL_VERSIONS.index(minimum)
    except ValueError:
        return False


def is_modern(version: str | None) -> bool:
    return version in MODERN_VERSIONS


def declares_completions(version: str) -> bool:
    """The ``completions`` capability exists from 2025-03-26; older servers served completion implicitly."""
    return at_least(version, "2025-03-26")
