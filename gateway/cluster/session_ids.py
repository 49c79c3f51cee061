"""Sealed session ids, sans I/O: a handshake-era session's state carried in its ``Mcp-Session-Id``.

The id holds what a replica needs to serve the session's next request without having seen the first:
the negotiated revision, what the client declared it can be asked (elicitation, sampling, roots), its
name, the identity the session belongs to, and when it was made and stops. It is sealed with the AEAD
of ``sealing.py`` under ``[cluster] session_keys`` (the first seals, every one opens: keys rotate
without dropping a session), so any replica holding the keys accepts it and nobody else can read or
forge one. Without configured keys the process makes one of its own: a single gateway works as it
always did.

A tampered, foreign, truncated, oversized or expired id opens to nothing, and the front end answers
404 as for an unknown session (the client then starts a new one, as the spec has it).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.cluster.sealing import Sealer

PREFIX = "s1."
"""Marks the format (and its version): a plain random id from an older gateway never opens."""
MAX_ID_CHARS = 2048
_ENCODED = re.compile(r"^[A-Za-z0-9_-]+$")
MAX_CAPABILITIES_CHARS = 1024
ASKABLE = ("elicitation", "sampling", "roots")
"""The client capabilities the gateway acts on (it relays upstreams' requests only to clients that declared them)."""


@dataclass(frozen=True)
class Negotiated:
    """What a session's initialize settled, to be sealed into its id."""

    protocol_version: str
    capabilities: Mapping[str, Any]
    client_name: str | None


@dataclass(frozen=True)
class SealedState:
    """What a sealed id says about its session."""

    protocol_version: str
    principal: str | None
    created: int  # Unix seconds
    expires: int
    capabilities: Mapping[str, Any] = field(default_factory=dict)
    client_name: str | None = None

    def as_json(self) -> bytes:
        fields: dict[str, Any] = {"v": self.protocol_version, "p": self.principal, "c": self.created, "e": self.expires}
        if self.capabilities:
            fields["k"] = dict(self.capabilities)
        if self.client_name is not None:
            fields["n"] = self.client_name
        return json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()


def askable(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a client's capabilities a session id keeps: what it can be asked, bounded."""
    kept = {key: capabilities[key] for key in ASKABLE if isinstance(capabilities.get(key), dict)}
    if len(json.dumps(kept)) > MAX_CAPABILITIES_CHARS:
        kept = {key: {} for key in kept}  # declared, details dropped: enough to be asked
    return kept


class SessionIds:
    def __init__(self, keys: Sequence[bytes] = (), *, ttl_s: float = 86_400.0) -> None:
        self._sealer = Sealer(list(keys) or [secrets.token_bytes(32)], purpose=b"session-id")
        self.ttl_s = ttl_s
        self.shared = bool(keys)  # other replicas (or a restart) may open these ids

    def issue(
        self,
        *,
        protocol_version: str,
        principal: str | None,
        capabilities: Mapping[str, Any],
        client_name: str | None,
        now: float,
    ) -> str:
        state = SealedState(
            protocol_version=protocol_version,
            principal=principal,
            created=int(now),
            expires=int(now + self.ttl_s),
            capabilities=askable(capabilities),
            client_name=client_name[:128] if isinstance(client_name, str) else None,
        )
        sealed = self._sealer.seal(state.as_json(), header=PREFIX.encode())
        return PREFIX + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()

    def open(self, session_id: str, *, now: float) -> SealedState | None:
        """The state an id carries, or None: not ours, tampered, malformed or expired."""
        if len(session_id) > MAX_ID_CHARS or not session_id.startswith(PREFIX):
            return None
        encoded = session_id[len(PREFIX) :]
        if not _ENCODED.match(encoded):
            return None
        try:
            sealed = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        except (binascii.Error, ValueError):
            return None
        if base64.urlsafe_b64encode(sealed).rstrip(b"=").decode() != encoded:
            return None  # the last character's unused bits set: another spelling of one id, never accepted
        plaintext = self._sealer.open(sealed, header=PREFIX.encode())
        if plaintext is None:
            return None
        try:
            fields = json.loads(plaintext)
            state = SealedState(
                protocol_version=str(fields["v"]),
                principal=fields["p"],
                created=int(fields["c"]),
                expires=int(fields["e"]),
                capabilities=fields.get("k", {}),
                client_name=fields.get("n"),
            )
        except (ValueError, KeyError, TypeError):
            return None  # sealed by us, so never expected: a key shared with something else
        if now >= state.expires:
            return None
        return state
