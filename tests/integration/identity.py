"""A real OpenID Provider for the identity tests (npm ``oidc-provider``, installed under ``interop/`` with
the other npm peers), with signing keys the test makes, so that it can also sign the tokens a provider
never would (expired, for another audience, ...) with the provider's own key."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.integration.helpers import ROOT
from tests.interop.conftest import node_binary

PROVIDER_SCRIPT = ROOT / "interop" / "oidc_provider.mjs"
PROVIDER_PACKAGE = ROOT / "interop" / "node_modules" / "oidc-provider"


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private: rsa.RSAPrivateKey

    def private_jwk(self) -> dict[str, Any]:
        jwk: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(self.private))
        return {**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        return jwt.encode(claims, self.private, algorithm="RS256", headers={"kid": self.kid, **header})


def signing_key(kid: str) -> SigningKey:
    return SigningKey(kid, rsa.generate_private_key(public_exponent=65537, key_size=2048))


@dataclass(frozen=True)
class Provider:
    issuer: str
    process: Process | None = None

    async def stop(self) -> None:
        """Stop it now (a restart on the same address follows, as at a key rotation)."""
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            with anyio.fail_after(10):
                await self.process.wait()

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"


def require_provider() -> str:
    node = node_binary()
    if node is None or not PROVIDER_PACKAGE.is_dir():
        reason = "oidc-provider is not installed (npm ci --prefix interop; .ci/run does it)"
        if os.environ.get("REQUIRE_SERVICES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return node


def _provider_config(
    directory: Path,
    *,
    resource: str,
    keys: Sequence[SigningKey],
    clients: Sequence[dict[str, Any]],
    port: int,
    opaque: bool,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / f"provider-{port}-{keys[0].kid}.json"
    jwks = {"keys": [key.private_jwk() for key in keys]}
    document = {"port": port, "resource": resource, "jwks": jwks, "clients": list(clients), "opaque": opaque}
    config.write_text(json.dumps(document))
    return config


@asynccontextmanager
async def oidc_provider(
    directory: Path,
    *,
    resource: str,
    keys: Sequence[SigningKey],
    clients: Sequence[dict[str, Any]],
    port: int = 0,
    opaque: bool = False,
) -> AsyncIterator[Provider]:
    node = require_provider()
    config = _provider_config(directory, resource=resource, keys=keys, clients=clients, port=port, opaque=opaque)
    async with await anyio.open_process([node, str(PROVIDER_SCRIPT), str(config)], cwd=ROOT / "interop") as process:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        try:
            with anyio.fail_after(30):
                try:
                    first = json.loads(await lines.receive_until(b"\n", 65536))
                except anyio.IncompleteRead:
                    assert process.stderr is not None
                    said = await process.stderr.receive(65536)
                    pytest.fail(f"the OpenID Provider did not start: {said.decode(errors='replace')[-2000:]}")
            yield Provider(first["issuer"], process)
        finally:
            if process.returncode is None:
                process.terminate()
            with anyio.fail_after(10):
                await process.wait()


async def client_credentials_token(provider: Provider, client_id: str, secret: str, resource: str, scope: str) -> str:
    """A real access token from the provider's token endpoint (what an agent's OAuth client does)."""
    import httpx

    async with httpx.AsyncClient() as http:
        answer = await http.post(
            provider.token_endpoint,
            data={"grant_type": "client_credentials", "resource": resource, "scope": scope},
            auth=(client_id, secret),
        )
    assert answer.status_code == 200, answer.text
    token = answer.json()["access_token"]
    assert isinstance(token, str)
    return token
