"""Section ``auth``: what checking access tokens costs the gateway, a JWT (its issuer's keys cached)
beside a static token.
"""

from __future__ import annotations

import json
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from bench.config import stdio_upstream, toml
from bench.processes import (
    free_port,
    http_gateway,
)
from bench.rounds import ROUNDS, in_rounds, load_http


async def bench_auth(quick: bool, use_wrk: bool) -> dict[str, Any]:
    """Gateway CPU per ``prompts/get`` over HTTP at 16 in flight, authenticated by a JWT access token
    (signature and claims checked, keys from an issuer served here) beside a static bearer token, same run."""
    import jwt
    import uvicorn
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = {**json.loads(RSAAlgorithm.to_jwk(key.public_key())), "kid": "bench", "alg": "RS256", "use": "sig"}
    issuer_port, gateway_port = free_port(), free_port()
    issuer = f"http://127.0.0.1:{issuer_port}"
    resource = f"http://127.0.0.1:{gateway_port}/mcp"
    metadata = {"issuer": issuer, "jwks_uri": f"{issuer}/jwks"}
    issuer_app = Starlette(
        routes=[
            Route("/.well-known/oauth-authorization-server", lambda _: JSONResponse(metadata)),
            Route("/jwks", lambda _: JSONResponse({"keys": [public]})),
        ]
    )
    server = uvicorn.Server(uvicorn.Config(issuer_app, host="127.0.0.1", port=issuer_port, log_config=None))
    static = "bench-static-token-0123456789"
    claims = {"iss": issuer, "aud": resource, "sub": "bench", "scope": "prompts:read", "exp": int(time.time()) + 3600}
    access_token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "bench"})
    upstream = stdio_upstream()
    lines = [
        "[server]", 'transport = "http"', f"port = {gateway_port}", "max_connections_per_client = 20000",
        "[server.auth]", f"resource = {json.dumps(resource)}",
        "[[server.auth.issuers]]", f"issuer = {json.dumps(issuer)}",
        "[[server.tokens]]", 'name = "bench"', f"token = {json.dumps(static)}",
        "[[upstreams]]", 'namespace = "up"', *(f"{k} = {toml(v)}" for k, v in upstream.items()),
    ]  # fmt: skip
    seconds = 1 if quick else 8
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "auth.toml"
        config.write_text("\n".join(lines) + "\n")
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            async with http_gateway(config) as (url, process):
                measures = {
                    name: partial(
                        load_http, url, "up__p00001", modern=False, use_wrk=use_wrk, concurrency=16,
                        total=500 if quick else 4000, budget_s=seconds, cpu_of={"middle": process.pid},
                        headers={"Authorization": f"Bearer {token}"},
                    )
                    for name, token in (("static token", static), ("JWT", access_token))
                }  # fmt: skip
                measured = await in_rounds(measures, 1 if quick else ROUNDS)
            server.should_exit = True
    static_cpu = measured["static token"]["cpu_us_per_request"]["middle"]
    jwt_cpu = measured["JWT"]["cpu_us_per_request"]["middle"]
    return {
        "rows": [{"token": name, **row} for name, row in measured.items()],
        "jwt_vs_static_gateway_cpu_at_16": jwt_cpu / static_cpu,
    }
