"""The gateway as an OAuth 2.1 resource server, against a real OpenID Provider (npm oidc-provider) issuing
real signed JWT access tokens: metadata and challenges, the official SDK's OAuth client, refused tokens,
key rotation, and per-person views from token claims."""

from __future__ import annotations

import base64
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import jwt
import mcp.types as t
import pytest
from cryptography.hazmat.primitives import serialization
from mcp import Client, MCPError
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from gateway.protocol.modern import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY
from tests.integration.helpers import (
    HTTP_HEADERS,
    INITIALIZE,
    ROOT,
    gateway_command,
    gateway_params,
    http_upstream,
    running_gateway,
    write_config,
)
from tests.integration.identity import Provider, SigningKey, client_credentials_token, oidc_provider, signing_key
from tests.integration.services import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.services]

ALICE = {"client_id": "alice", "client_secret": "alice-secret-0123456789", "groups": ["eng"]}
BOB = {"client_id": "bob", "client_secret": "bob-secret-0123456789ab", "groups": ["sales"]}
OUTSIDER = {"client_id": "mallory", "client_secret": "mallory-secret-012345678", "scope": "prompts:admin"}
NAMESAKE = {"client_id": "ci", "client_secret": "ci-client-secret-0123456789", "groups": ["eng"]}
OPERATOR = {"client_id": "ops", "client_secret": "ops-secret-0123456789abcd", "scope": "prompts:read prompts:admin"}
"""A person (a client) whose subject is the name of a static token, ``ci``."""
CI_TOKEN = "ci-static-token-0123456789abcdef"
STATIC_CI = f"""[[server.tokens]]
name = "ci"
token = "{CI_TOKEN}"
policy = {{ deny = ["eng__*"] }}
"""


@dataclass
class Setup:
    url: str  # the MCP endpoint, which is also the resource tokens are issued for
    base: str
    provider: Provider
    key: SigningKey
    config: Path


def gateway_toml(
    port: int, issuer: str, *, page_size: int = 100, refresh_s: float = 60, audit: Path | None = None, extra: str = ""
) -> str:
    python = json.dumps(sys.executable)
    audit_table = f"[server.audit]\nfile = {json.dumps(str(audit))}\n" if audit else ""
    return f"""
[gateway]
page_size = {page_size}
[server]
transport = "http"
port = {port}
{audit_table}[server.auth]
resource = "http://127.0.0.1:{port}/mcp"
scopes_required = ["prompts:read"]
jwks_refresh_min_s = {refresh_s}
[[server.auth.issuers]]
issuer = "{issuer}"
[[server.views]]
name = "outsiders"
match = {{ claim = "groups", none_of = ["eng"] }}
policy = {{ allow = ["*"], deny = ["eng__*"] }}
[[upstreams]]
namespace = "writing"
command = {python}
args = ["-m", "gateway.demo.writing"]
[[upstreams]]
namespace = "eng"
command = {python}
args = ["-m", "gateway.demo.engineering"]
{extra}"""


@asynccontextmanager
async def identity_setup(
    tmp_path: Path, *, page_size: int = 100, refresh_s: float = 60, extra: str = ""
) -> AsyncIterator[Setup]:
    """A provider, and the gateway trusting it, auditing to ``tmp_path/audit.jsonl``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    key = signing_key("key-1")
    clients = [ALICE, BOB, OUTSIDER, NAMESAKE, OPERATOR]
    async with oidc_provider(tmp_path, resource=url, keys=[key], clients=clients) as provider:
        config = tmp_path / "gateway.toml"
        audit = tmp_path / "audit.jsonl"
        config.write_text(
            gateway_toml(port, provider.issuer, page_size=page_size, refresh_s=refresh_s, audit=audit, extra=extra)
        )
        async with running_gateway(config):
            yield Setup(url, f"http://127.0.0.1:{port}", provider, key, config)


async def token_for(setup: Setup, client: dict[str, Any], scope: str = "prompts:read") -> str:
    return await client_credentials_token(
        setup.provider, client["client_id"], client["client_secret"], setup.url, scope
    )


async def initialize(url: str, token: str | None) -> httpx.Response:
    headers = dict(HTTP_HEADERS) | ({"Authorization": f"Bearer {token}"} if token else {})
    async with httpx.AsyncClient() as http:
        return await http.post(url, json=INITIALIZE, headers=headers)


async def test_metadata_and_challenges_lead_clients_to_the_provider(tmp_path: Path) -> None:
    async with identity_setup(tmp_path) as setup:
        refused = await initialize(setup.url, None)
        assert refused.status_code == 401
        metadata_url = f"{setup.base}/.well-known/oauth-protected-resource/mcp"
        challenge = refused.headers["www-authenticate"]
        assert challenge.startswith("Bearer ")
        assert f'resource_metadata="{metadata_url}"' in challenge
        assert 'scope="prompts:read"' in challenge
        async with httpx.AsyncClient() as http:
            for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
                document = (await http.get(f"{setup.base}{path}")).json()
                assert document["resource"] == setup.url
                assert document["authorization_servers"] == [setup.provider.issuer]
                assert document["scopes_supported"] == ["prompts:read"]
            legacy = await http.get(f"{setup.base}/sse", headers={"Accept": "text/event-stream"})
        assert legacy.status_code == 401
        assert f'resource_metadata="{metadata_url}"' in legacy.headers["www-authenticate"]
        alice = await token_for(setup, ALICE)
        accepted = await initialize(setup.url, alice)
        assert accepted.status_code == 200, accepted.text
        stateless = {  # the 2026-07-28 era: no session, every request carries the token
            "jsonrpc": "2.0",
            "id": 7,
            "method": "prompts/list",
            "params": {"_meta": {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}}},
        }
        modern_headers = {**HTTP_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/list"}
        async with httpx.AsyncClient() as http:
            anonymous = await http.post(setup.url, json=stateless, headers=modern_headers)
            assert anonymous.status_code == 401
            assert f'resource_metadata="{metadata_url}"' in anonymous.headers["www-authenticate"]
            listed = await http.post(
                setup.url, json=stateless, headers={**modern_headers, "Authorization": f"Bearer {alice}"}
            )
            assert listed.status_code == 200
            assert "eng__code_review" in [p["name"] for p in listed.json()["result"]["prompts"]]
        no_scope = await initialize(setup.url, await token_for(setup, OUTSIDER, scope="prompts:admin"))
        assert no_scope.status_code == 403
        assert 'error="insufficient_scope"' in no_scope.headers["www-authenticate"]


class MemoryTokens:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@asynccontextmanager
async def oauth_client(setup: Setup, who: dict[str, Any]) -> AsyncIterator[Client]:
    """The official SDK client with its OAuth support: it starts from the 401, reads the metadata,
    finds the provider, gets a token by client credentials and retries."""
    auth = ClientCredentialsOAuthProvider(
        server_url=setup.url,
        storage=MemoryTokens(),
        client_id=who["client_id"],
        client_secret=who["client_secret"],
        scope="prompts:read",
        issuer=setup.provider.issuer,
    )
    async with (
        httpx2.AsyncClient(auth=auth) as http,
        Client(streamable_http_client(setup.url, http_client=http), mode="legacy", cache=None) as client,
    ):
        yield client


async def test_two_people_see_what_their_groups_allow_and_nothing_of_the_rest(tmp_path: Path) -> None:
    async with (
        identity_setup(tmp_path, page_size=2) as setup,
        oauth_client(setup, ALICE) as alice,
        oauth_client(setup, BOB) as bob,
    ):
        everything = await all_names(alice)
        assert {"writing__summarize", "eng__code_review"} <= set(everything)
        bobs = await all_names(bob)
        assert bobs == [n for n in everything if not n.startswith("eng__")]
        review = await alice.get_prompt("eng__code_review", {"code": "x = 1"})
        assert review.messages
        with pytest.raises(MCPError) as hidden:
            await bob.get_prompt("eng__code_review", {"code": "x = 1"})
        assert (hidden.value.error.code, hidden.value.error.message) == (
            -32602,
            "Unknown prompt: eng__code_review",
        )
        with pytest.raises(MCPError) as not_completed:
            await bob.complete(
                t.PromptReference(type="ref/prompt", name="eng__code_review"), {"name": "language", "value": "p"}
            )
        assert not_completed.value.error.message == "Unknown prompt: eng__code_review"
        alices_page = await alice.list_prompts()
        assert alices_page.next_cursor is not None
        with pytest.raises(MCPError) as foreign:
            await bob.list_prompts(cursor=alices_page.next_cursor)  # a cursor minted for another view
        assert foreign.value.error.message == "Invalid cursor"


async def all_names(client: Client) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    while True:
        page = await client.list_prompts(cursor=cursor)
        names += [p.name for p in page.prompts]
        if page.next_cursor is None:
            return names
        cursor = page.next_cursor


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


async def test_tokens_a_resource_server_must_refuse_are_refused(tmp_path: Path) -> None:
    async with identity_setup(tmp_path) as setup:
        real = await token_for(setup, ALICE)
        claims = jwt.decode(real, options={"verify_signature": False})
        now = int(time.time())
        public_pem = setup.key.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        head, body, signature = real.split(".")
        tampered = f"{head}.{_b64({**claims, 'groups': ['eng', 'admin']})}.{signature}"
        stranger = signing_key("key-1")  # the same kid, another key: a forged signature
        cases = {
            "expired": setup.key.sign({**claims, "iat": now - 3600, "exp": now - 600}),
            "not yet valid": setup.key.sign({**claims, "nbf": now + 600}),
            "wrong audience": setup.key.sign({**claims, "aud": "https://elsewhere.example/mcp"}),
            "wrong issuer": setup.key.sign({**claims, "iss": "https://idp.example"}),
            "alg none": f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{body}.",
            "HS256 keyed with the public key": _hs256_with(public_pem, claims),
            "tampered": tampered,
            "unknown kid": signing_key("key-unknown").sign(claims),
            "forged signature": stranger.sign(claims),
            "no expiry": setup.key.sign({k: v for k, v in claims.items() if k != "exp"}),
        }
        for case, token in cases.items():
            answer = await initialize(setup.url, token)
            assert answer.status_code == 401, case
            assert 'error="invalid_token"' in answer.headers["www-authenticate"], case
        other_key = signing_key("other-1")
        async with oidc_provider(tmp_path / "other", resource=setup.url, keys=[other_key], clients=[ALICE]) as other:
            foreign = await client_credentials_token(
                other, ALICE["client_id"], ALICE["client_secret"], setup.url, "prompts:read"
            )
        answer = await initialize(setup.url, foreign)
        assert answer.status_code == 401
        assert "not a configured issuer" in answer.text


def _hs256_with(secret: bytes, claims: dict[str, Any]) -> str:
    """HS256 keyed with the public key's PEM: the forgery a verifier that lets the token pick the
    algorithm falls for. PyJWT refuses to make one, so it is made by hand (hashlib's HMAC)."""
    import hashlib
    import hmac

    signing_input = f"{_b64({'alg': 'HS256', 'typ': 'JWT', 'kid': 'key-1'})}.{_b64(claims)}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


async def test_a_key_rotation_at_the_provider_is_followed_without_a_restart(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    old, new = signing_key("2026-old"), signing_key("2026-new")
    config = tmp_path / "gateway.toml"
    secret = (ALICE["client_id"], ALICE["client_secret"])
    async with oidc_provider(tmp_path / "a", resource=url, keys=[old], clients=[ALICE]) as a:
        provider_port = int(a.issuer.rsplit(":", 1)[1])  # the restarted provider keeps its address
        config.write_text(gateway_toml(port, a.issuer, refresh_s=0))
        async with running_gateway(config):
            before = await client_credentials_token(a, *secret, url, "prompts:read")
            assert (await initialize(url, before)).status_code == 200
            await a.stop()
            async with oidc_provider(
                tmp_path / "b", resource=url, keys=[new], clients=[ALICE], port=provider_port
            ) as b:
                after = await client_credentials_token(b, *secret, url, "prompts:read")
                assert jwt.get_unverified_header(after)["kid"] == "2026-new"
                assert (await initialize(url, after)).status_code == 200  # the keys were fetched again
                assert (await initialize(url, before)).status_code == 401  # and the retired key is gone


async def test_check_fetches_each_issuers_keys_and_names_what_fails(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with oidc_provider(tmp_path, resource=url, keys=[signing_key("check-1")], clients=[ALICE]) as provider:
        good = tmp_path / "good.toml"
        good.write_text(gateway_toml(port, provider.issuer))
        result = await anyio.run_process(gateway_command(good, "check"), cwd=ROOT, check=False)
        output = result.stdout.decode()
        assert result.returncode == 0, output + result.stderr.decode()
        assert f"{provider.issuer}  ready  1 keys from {provider.issuer}/jwks: check-1" in output
        unreachable = f"http://127.0.0.1:{free_port()}"
        bad = tmp_path / "bad.toml"
        bad.write_text(gateway_toml(port, unreachable))
        result = await anyio.run_process(gateway_command(bad, "check"), cwd=ROOT, check=False)
    assert result.returncode == 1
    row = next(line for line in result.stdout.decode().splitlines() if line.startswith(unreachable))
    assert "failed" in row
    assert "no usable metadata" in row


async def test_an_upstream_that_is_a_protected_resource_gets_the_gateways_own_token(tmp_path: Path) -> None:
    """oauth = { ... } on an upstream: the gateway fetches a token by client credentials for the upstream's
    URL and sends it; the upstream (which checks it against the provider's keys) serves the gateway."""
    upstream_port = free_port()
    upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
    gateway_client = {"client_id": "gateway", "client_secret": "gateway-secret-0123456789"}
    keys = [signing_key("upstream-1")]
    async with oidc_provider(tmp_path, resource=upstream_url, keys=keys, clients=[gateway_client]) as provider:
        env = {"SERVE_REQUIRE_ISSUER": provider.issuer}
        async with http_upstream("completing", "streamable-http", port=upstream_port, env=env) as url:
            async with httpx.AsyncClient() as http:
                assert (await http.post(url, json=INITIALIZE, headers=HTTP_HEADERS)).status_code == 401
            oauth = {
                "token_url": provider.token_endpoint,
                "client_id": gateway_client["client_id"],
                "client_secret": gateway_client["client_secret"],
                "scope": "prompts:read",
            }
            protected = {"namespace": "prot", "transport": "streamable-http", "url": url, "oauth": oauth}
            config = write_config(tmp_path / "c.toml", [protected])
            async with Client(gateway_params(config), mode="legacy", cache=None) as client:
                names = {p.name for p in (await client.list_prompts()).prompts}
                assert "prot__weather" in names
                weather = await client.get_prompt("prot__weather", {"country": "FR", "city": "Lyon"})
                assert weather.messages[0].content == t.TextContent(type="text", text="Weather in Lyon, FR (metric)")
            wrong = {**protected, "oauth": {**oauth, "client_secret": "not-the-secret-0123"}}
            result = await anyio.run_process(
                gateway_command(write_config(tmp_path / "w.toml", [wrong]), "check"), cwd=ROOT, check=False
            )
    assert result.returncode == 1
    assert "answered HTTP 401 (invalid_client)" in result.stdout.decode()
    assert "not-the-secret" not in result.stdout.decode() + result.stderr.decode()


async def test_opaque_tokens_are_introspected_at_the_issuer(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    introspector = {"client_id": "gateway", "client_secret": "gateway-secret-0123456789"}
    clients = [ALICE, BOB, introspector]
    async with oidc_provider(tmp_path, resource=url, keys=[signing_key("o-1")], clients=clients, opaque=True) as idp:
        config = tmp_path / "gateway.toml"
        introspection = (
            "[server.auth.issuers.introspection]\n"
            f'client_id = "{introspector["client_id"]}"\nclient_secret = "{introspector["client_secret"]}"\n'
        )
        config.write_text(
            gateway_toml(port, idp.issuer).replace("[[server.views]]", introspection + "[[server.views]]", 1)
        )
        async with running_gateway(config):
            alice = await client_credentials_token(idp, ALICE["client_id"], ALICE["client_secret"], url, "prompts:read")
            assert alice.count(".") != 2  # opaque, not a JWT
            assert (await initialize(url, alice)).status_code == 200
            made_up = await initialize(url, "an-opaque-token-nobody-issued-0123456789")
            assert made_up.status_code == 401
            assert 'error="invalid_token"' in made_up.headers["www-authenticate"]
            bob = await client_credentials_token(idp, BOB["client_id"], BOB["client_secret"], url, "prompts:read")
            async with httpx.AsyncClient() as http:
                headers = dict(HTTP_HEADERS) | {"Authorization": f"Bearer {bob}"}
                session = (await http.post(url, json=INITIALIZE, headers=headers)).headers["mcp-session-id"]
                headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
                await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
                listed = await http.post(
                    url, json={"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}, headers=headers
                )
            names = [p["name"] for p in listed.json()["result"]["prompts"]]
            assert names
            assert not [n for n in names if n.startswith("eng__")]  # bob's view, from the introspected claims


def audit_events(setup: Setup) -> list[dict[str, Any]]:
    path = setup.config.parent / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_a_static_token_and_a_person_of_the_same_name_are_two_identities(tmp_path: Path) -> None:
    """A static token named ``ci`` and an access token whose subject is ``ci``: each one's session
    refuses the other (it answered with the other's view), each sees its own view, and the audit tells
    them apart (both were ``who: "ci"``)."""
    async with identity_setup(tmp_path, extra=STATIC_CI) as setup, httpx.AsyncClient(timeout=20) as http:
        person = await token_for(setup, NAMESAKE)
        sessions = {}
        for credential in (person, CI_TOKEN):
            opened = await initialize(setup.url, credential)
            assert opened.status_code == 200, opened.text
            sessions[credential] = opened.headers["mcp-session-id"]

        async def listed(credential: str, session_id: str) -> httpx.Response:
            headers = {**HTTP_HEADERS, "Authorization": f"Bearer {credential}", "Mcp-Session-Id": session_id}
            listing = {"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}
            return await http.post(setup.url, json=listing, headers=headers)

        for mine, theirs in ((person, CI_TOKEN), (CI_TOKEN, person)):
            assert (await listed(theirs, sessions[mine])).status_code == 404
        persons = [p["name"] for p in (await listed(person, sessions[person])).json()["result"]["prompts"]]
        tokens = [p["name"] for p in (await listed(CI_TOKEN, sessions[CI_TOKEN])).json()["result"]["prompts"]]
        assert "eng__code_review" in persons
        assert "eng__code_review" not in tokens
        for credential in (person, CI_TOKEN):
            get = {"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "writing__summarize"}}
            headers = {**HTTP_HEADERS, "Authorization": f"Bearer {credential}", "Mcp-Session-Id": sessions[credential]}
            get["params"]["arguments"] = {"text": "x"}  # type: ignore[index]
            assert "result" in (await http.post(setup.url, json=get, headers=headers)).json()
    gets = [e for e in audit_events(setup) if e.get("method") == "prompts/get" and e.get("outcome") == "ok"]
    assert sorted(e["who"]["kind"] for e in gets) == ["oauth", "token"]
    assert {e["who"]["name"] for e in gets} == {"ci"}
    assert [e["who"].get("issuer") for e in gets if e["who"]["kind"] == "oauth"] == [setup.provider.issuer]


async def test_refusals_are_audited_with_who_and_what(tmp_path: Path) -> None:
    """A valid token lacking the scope is audited with its subject (it was ``who: null``), and refused
    gets and completions say their method and prompt, from the headers (2026-07-28) or the body."""
    async with identity_setup(tmp_path) as setup, httpx.AsyncClient(timeout=20) as http:
        outsider = await token_for(setup, OUTSIDER, scope="prompts:admin")
        get = {"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "eng__code_review"}}
        complete = {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "completion/complete",
            "params": {
                "ref": {"type": "ref/prompt", "name": "writing__translate"},
                "argument": {"name": "a", "value": ""},
            },
        }
        headers = {**HTTP_HEADERS, "Authorization": f"Bearer {outsider}"}
        assert (await http.post(setup.url, json=get, headers=headers)).status_code == 403
        assert (await http.post(setup.url, json=complete, headers=HTTP_HEADERS)).status_code == 401
        modern = {**HTTP_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/get", "Mcp-Name": "x__y"}
        assert (await http.post(setup.url, json=get, headers=modern)).status_code == 401  # the body decides
        modern_completion = {**modern, "Mcp-Method": "completion/complete", "Mcp-Name": "writing__translate"}
        assert (await http.post(setup.url, json=complete, headers=modern_completion)).status_code == 401
        assert (await http.post(setup.url, json=[get, complete], headers=HTTP_HEADERS)).status_code == 401
        tool = {"jsonrpc": "2.0", "id": 5, "method": "tools/call"}
        tool["params"] = {"name": "get_prompt", "arguments": {"name": "eng__deploy"}}
        assert (await http.post(setup.url, json=tool, headers=HTTP_HEADERS)).status_code == 401
        async with http.stream("GET", f"{setup.base}/sse", headers={"Accept": "text/event-stream"}) as sse:
            assert sse.status_code == 401
    refused = [e for e in audit_events(setup) if e.get("outcome") == "refused"]
    assert [(e["status"], e["method"], e["prompt"]) for e in refused] == [
        (403, "prompts/get", "eng__code_review"),
        (401, "completion/complete", "writing__translate"),
        (401, "prompts/get", "eng__code_review"),
        (401, "completion/complete", "writing__translate"),
        (401, "prompts/get", "eng__code_review"),  # a batch: each member
        (401, "completion/complete", "writing__translate"),
        (401, "tools/call", "eng__deploy"),
        (401, None, None),  # a GET asks for no method
    ]
    assert refused[0]["who"] == {"kind": "oauth", "name": "mallory", "issuer": setup.provider.issuer}
    assert refused[1]["who"] is None


async def test_the_operator_page_takes_an_access_token_that_carries_its_scope(tmp_path: Path) -> None:
    admin = '[server.admin]\nenabled = true\nscope = "prompts:admin"\n'
    async with identity_setup(tmp_path, extra=admin) as setup, httpx.AsyncClient(timeout=20) as http:
        operator = await token_for(setup, OPERATOR, "prompts:read prompts:admin")
        reader = await token_for(setup, ALICE)
        page = f"{setup.base}/admin"
        assert (await http.get(page)).status_code == 401
        assert (await http.get(page, headers={"Authorization": f"Bearer {reader}"})).status_code == 403
        assert (await http.get(page, headers={"Authorization": "Bearer not-a-token"})).status_code == 401
        shown = await http.get(page, headers={"Authorization": f"Bearer {operator}"})
        assert shown.status_code == 200
        assert "Upstreams" in shown.text
        assert operator not in shown.text


async def test_wrong_page_tokens_from_an_address_never_lock_out_a_valid_access_token(tmp_path: Path) -> None:
    """Found by a review: the page's wrong-token limit was applied before access tokens were checked, so
    someone's guesses from the same address (a NAT, a proxy) locked out operators with valid tokens."""
    admin = '[server.admin]\nenabled = true\nscope = "prompts:admin"\ntoken = "page-token-0123456789abcdef"\n'
    admin += 'sign_in_failures = "2/minute"\n'
    async with identity_setup(tmp_path, extra=admin) as setup, httpx.AsyncClient(timeout=20) as http:
        operator = await token_for(setup, OPERATOR, "prompts:read prompts:admin")
        page = f"{setup.base}/admin"
        statuses = [
            (await http.get(page, headers={"Authorization": f"Bearer guess-{n:020d}"})).status_code for n in range(3)
        ]
        assert statuses == [401, 401, 429]
        assert (await http.get(page, headers={"Authorization": f"Bearer {operator}"})).status_code == 200


async def test_the_docs_sdk_example_runs_as_written(tmp_path: Path) -> None:
    """docs/authentication.md's Python SDK example, its placeholders replaced by this provider's, run as a
    script: a tester left out the storage and the issuer the docs did not show."""
    text = (ROOT / "docs" / "authentication.md").read_text()
    example = text.split("```python\n", 1)[1].split("```", 1)[0]
    async with identity_setup(tmp_path) as setup:
        for placeholder, value in (
            ("https://prompts.example.com/mcp", setup.url),
            ('"ci-job"', repr(ALICE["client_id"])),
            ('"..."', repr(ALICE["client_secret"])),
            ("https://login.example.com/realms/team", setup.provider.issuer),
        ):
            assert placeholder in example
            example = example.replace(placeholder, value)
        script = tmp_path / "example.py"
        script.write_text(example + "\n\nimport asyncio\n\nasyncio.run(main())\n")
        with anyio.fail_after(60):
            ran = await anyio.run_process([sys.executable, "-W", "error::DeprecationWarning", str(script)], check=False)
    assert ran.returncode == 0, ran.stderr.decode()
    assert "eng__code_review" in ran.stdout.decode()
