"""``prompt-gateway explain``: why a caller sees a prompt or not. The caller is named as the config knows
it (a ``[[server.tokens]]`` name, or the claims of a person's access token, matched against the views);
the upstreams are asked for their lists as when serving, and the catalog explains each prompt with the
policy code that serves requests (``catalog/explain.py``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gateway.app import run_gateway
from gateway.catalog.explain import Layer, not_found
from gateway.catalog.policy import Rules
from gateway.config import Config
from gateway.identity.views import ClaimViews
from gateway.protocol.errors import ConfigError

EXIT_VISIBLE, EXIT_HIDDEN, EXIT_USAGE = 0, 1, 2


def caller_layers(config: Config, *, token: str | None, claims: dict[str, Any] | None) -> tuple[str, list[Layer]]:
    """Who is asking, in words, and the policies beyond the global one their requests go through."""
    separator = config.gateway.namespace_separator
    if token is not None:
        tokens = {t.name: t for t in config.server.tokens}
        if token not in tokens:
            known = ", ".join(sorted(tokens)) or "none are configured"
            raise ConfigError(f"--token {token!r}: no [[server.tokens]] entry has that name ({known})")
        return f"token {token}", [Layer(f"the policy of token {token}", Rules.of(tokens[token].policy, separator))]
    if claims is not None:
        if not config.server.views:
            raise ConfigError(
                "--claims: this config has no [[server.views]]: a person sees what the global policy shows"
            )
        matched = ClaimViews(config.server.views, separator).matching(claims)
        who = "a person whose token matches " + (", ".join(f"view {n}" for n, _ in matched) or "no view")
        return who, [Layer(f"view {name}", rules) for name, rules in matched]
    return "a caller without a token (stdio, or HTTP without [[server.tokens]])", []


def read_claims(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--claims {path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        claims = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--claims {path}: is not JSON ({exc})") from exc
    if not isinstance(claims, dict):
        raise ConfigError(f"--claims {path}: must hold a JSON object of claims, as an access token carries")
    return claims


async def explain_command(
    config: Config, name: str | None, *, token: str | None, claims_file: str | None, as_json: bool
) -> int:
    claims = read_claims(claims_file) if claims_file is not None else None
    who, layers = caller_layers(config, token=token, claims=claims)
    async with run_gateway(config, settle=True) as gateway:
        explained, unavailable = await gateway.catalog.explanations(layers, name, refresh=True)
        everything = (await gateway.catalog.explanations(layers))[0] if not explained else []
    if as_json:
        print(
            json.dumps(
                {"caller": who, "prompts": [e.as_json() for e in explained], "unavailable": unavailable}, indent=2
            )
        )
    else:
        print(f"for {who}:")
        for item in explained:
            print(
                "\n".join(item.described())
                if name is not None
                else f"  {item.public}: {'visible' if item.visible else 'hidden'} — {item.decided_by}"
            )
    for namespace in unavailable:
        print(f"warning: upstream {namespace} is unavailable: its prompts are not explained", file=sys.stderr)
    if name is None:
        return EXIT_VISIBLE
    if not explained:
        print(not_found(name, everything), file=sys.stderr)
        return EXIT_HIDDEN
    return EXIT_VISIBLE if any(e.visible for e in explained) else EXIT_HIDDEN
