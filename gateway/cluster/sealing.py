"""Sealed tokens: what the gateway hands a client to give back later (a listing cursor now, session
ids later), encrypted and authenticated so that the client can neither read nor forge it, and any
replica holding the same keys can open it. No server-side state.

An AEAD from ``cryptography`` (AES-256-GCM-SIV: a repeated random nonce, however unlikely, leaks no
key stream), a key per purpose derived from each configured secret with HKDF, so a cursor can never be
passed off as a session id. Keys rotate: the first secret seals, every secret opens, so a new secret
put first and the old one kept second drops no token in flight.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

NONCE_BYTES = 12
TAG_BYTES = 16
MAX_SECRETS = 16  # opening tries each key: the list is short by design


def _derive(secret: bytes, purpose: bytes) -> AESGCMSIV:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"mcp-prompt-gateway/" + purpose).derive(secret)
    return AESGCMSIV(key)


class Sealer:
    def __init__(self, secrets: Sequence[bytes], *, purpose: bytes) -> None:
        if not secrets:
            raise ValueError("a sealer needs at least one secret")
        if len(secrets) > MAX_SECRETS:
            raise ValueError(f"at most {MAX_SECRETS} secrets")
        self._aeads = [_derive(secret, purpose) for secret in secrets]
        self._purpose = purpose

    def seal(self, plaintext: bytes, *, header: bytes = b"") -> bytes:
        """``nonce | ciphertext | tag``; ``header`` (sent in the clear by the caller, a version byte say)
        is authenticated with it."""
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aeads[0].encrypt(nonce, plaintext, header + self._purpose)

    def open(self, sealed: bytes, *, header: bytes = b"") -> bytes | None:
        """The plaintext, or None when no key opens it (forged, tampered, sealed for another purpose or
        under a secret no longer configured)."""
        if len(sealed) < NONCE_BYTES + TAG_BYTES:
            return None
        nonce, body = sealed[:NONCE_BYTES], sealed[NONCE_BYTES:]
        for aead in self._aeads:
            try:
                return aead.decrypt(nonce, body, header + self._purpose)
            except InvalidTag:
                continue
        return None
