"""JWT access tokens from the configured authorization servers, checked as a resource server must
(MCP authorization; RFC 9068, RFC 8707): signed by a key of the issuer named in the token, for this
resource, in date, with an algorithm from the allow-list.

PyJWT does the JOSE work (parsing, signature, claims); nothing here touches a signature or parses a
key. The issuer's keys are found by discovery (RFC 8414 metadata, then OpenID Connect's), fetched with
the gateway's HTTP client and cached; a token signed with a key id the cache does not know makes the
keys be fetched again, at most once per ``jwks_refresh_min_s`` per issuer, so a provider's key rotation
is followed without a restart and a flood of made-up key ids costs one fetch a minute.

The algorithm allow-list holds asymmetric algorithms only: never ``none``, never an HMAC algorithm
(a public key used as an HMAC secret is the classic forgery), and the key must suit the algorithm.
"""

from __future__ import annotations

import json
import math
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import anyio
import jwt
import structlog

from gateway.config import AuthSettings, IssuerSettings
from gateway.observability.tracing import tracing
from gateway.transports.http_options import HTTP_ERRORS, HttpOptions, describe, upstream_session

log = structlog.get_logger("gateway.auth")

MAX_DOCUMENT_BYTES = 1024 * 1024
FETCH_TIMEOUT_S = 10.0


class TokenRejected(Exception):
    """The token is not acceptable; the message says why (it goes into ``error_description``)."""


class IssuerUnavailable(Exception):
    """The issuer's metadata or keys could not be fetched: the token can be neither accepted nor refused."""


@dataclass(frozen=True)
class AccessToken:
    issuer: str
    subject: str
    scopes: frozenset[str]
    claims: Mapping[str, Any]


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """``scope`` (a space-separated string, RFC 9068) or ``scp`` (a string or an array, as Entra and Okta
    issue it)."""
    found: set[str] = set()
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            found.update(value.split())
        elif isinstance(value, list):
            found.update(v for v in value if isinstance(v, str))
    return frozenset(found)


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata is, in the order MCP clients try: RFC 8414 (path-inserted), then
    OpenID Connect discovery (path-inserted, then appended)."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")

    def at(well_known: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, well_known, "", ""))

    urls = [at(f"/.well-known/oauth-authorization-server{path}"), at(f"/.well-known/openid-configuration{path}")]
    if path:
        urls.append(at(f"{path}/.well-known/openid-configuration"))
    return urls


async def fetch_json(url: str) -> dict[str, Any]:
    """A JSON object from ``url``, bounded in size and time, through the gateway's HTTP client (the
    environment's proxy settings apply)."""
    return await _request_json("GET", url)


async def _request_json(method: str, url: str, **request: Any) -> dict[str, Any]:
    """One request to an authorization server and its JSON object answer, bounded in size and time;
    any failure is an IssuerUnavailable saying what happened."""
    try:
        async with upstream_session(url, HttpOptions(timeout_s=FETCH_TIMEOUT_S)) as http:
            with anyio.fail_after(FETCH_TIMEOUT_S):
                headers = {"Accept": "application/json"}
                async with http.request(method, url, headers=headers, **request) as response:
                    body = await response.content.read(MAX_DOCUMENT_BYTES + 1)
                    status = response.status
    except HTTP_ERRORS as exc:
        raise IssuerUnavailable(f"{url}: {describe(exc)}") from exc
    if status != 200:
        raise IssuerUnavailable(f"{url} answered HTTP {status}")
    if len(body) > MAX_DOCUMENT_BYTES:
        raise IssuerUnavailable(f"{url} answered more than {MAX_DOCUMENT_BYTES} bytes")
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise IssuerUnavailable(f"{url} did not answer JSON") from exc
    if not isinstance(document, dict):
        raise IssuerUnavailable(f"{url} did not answer a JSON object")
    return document


class IssuerKeys:
    """One issuer's signing keys, fetched when first needed and again when a token names an unknown key."""

    def __init__(self, settings: IssuerSettings, refresh_min_s: float) -> None:
        self.settings = settings
        self._refresh_min_s = refresh_min_s
        self._keys: jwt.PyJWKSet | None = None
        self._fetched_at: float | None = None
        self._jwks_uri = settings.jwks_uri
        self._metadata: dict[str, Any] | None = None
        self._lock = anyio.Lock()
        self.generation = 0
        """Counts key loads: a token accepted under earlier keys is checked again against new ones."""

    async def discover(self) -> str:
        """The issuer's ``jwks_uri``, from its metadata (whose ``issuer`` must be the configured one)."""
        if self._jwks_uri is not None:
            return self._jwks_uri
        jwks_uri = (await self.metadata()).get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
            raise IssuerUnavailable(f"the metadata of {self.settings.issuer} names no jwks_uri")
        self._jwks_uri = jwks_uri
        return jwks_uri

    async def introspection_endpoint(self) -> str:
        introspection = self.settings.introspection
        assert introspection is not None  # noqa: S101 - asked only of issuers that introspect
        if introspection.endpoint is not None:
            return introspection.endpoint
        endpoint = (await self.metadata()).get("introspection_endpoint")
        if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
            raise IssuerUnavailable(f"the metadata of {self.settings.issuer} names no introspection_endpoint")
        return endpoint

    async def metadata(self) -> dict[str, Any]:
        """The issuer's metadata (RFC 8414, else OpenID Connect's), fetched once."""
        if self._metadata is not None:
            return self._metadata
        problems = []
        for url in metadata_urls(self.settings.issuer):
            try:
                metadata = await fetch_json(url)
            except IssuerUnavailable as exc:
                problems.append(str(exc))
                continue
            if metadata.get("issuer") != self.settings.issuer:
                problems.append(f"{url} names issuer {metadata.get('issuer')!r}, not {self.settings.issuer!r}")
                continue
            self._metadata = metadata
            return metadata
        raise IssuerUnavailable(f"no usable metadata for {self.settings.issuer}: " + "; ".join(problems))

    async def load(self) -> jwt.PyJWKSet:
        """Fetch the key set now (``check`` uses this to show the configuration works)."""
        jwks_uri = await self.discover()
        document = await fetch_json(jwks_uri)
        try:
            keys = jwt.PyJWKSet.from_dict(document)
        except jwt.PyJWKSetError as exc:
            raise IssuerUnavailable(f"{jwks_uri} holds no usable key: {exc}") from exc
        self._keys, self._fetched_at = keys, anyio.current_time()
        self.generation += 1
        log.info("issuer_keys_loaded", issuer=self.settings.issuer, keys=len(keys.keys))
        return keys

    async def key(self, kid: str | None) -> jwt.PyJWK:
        async with self._lock:
            if self._keys is None:
                await self.load()
            found = self._find(kid)
            stale = self._fetched_at is None or anyio.current_time() - self._fetched_at >= self._refresh_min_s
            if found is None and stale:  # a rotated key, maybe: look again, at a bounded rate
                await self.load()
                found = self._find(kid)
        if found is None:
            raise TokenRejected(f"signed with a key the issuer does not publish (kid {kid!r})")
        return found

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        assert self._keys is not None  # noqa: S101 - loaded by the caller
        signing = [k for k in self._keys.keys if k.public_key_use in (None, "sig")]
        if kid is None:
            return signing[0] if len(signing) == 1 else None
        return next((k for k in signing if k.key_id == kid), None)


def _expiry(access: AccessToken) -> float | None:
    """The token's ``exp`` (Unix time) where it states a finite one."""
    exp = access.claims.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, (int, float)) or not math.isfinite(exp):
        return None
    return float(exp)


class AccessTokenValidator:
    """Validates tokens, and remembers the ones it accepted (up to ``CACHE_SIZE``, each until it expires
    or ``CACHE_TTL_S`` passes): a client sends the same token with every request, and checking an RSA
    signature each time would cost the gateway more CPU than the request it admits."""

    CACHE_SIZE = 4096
    CACHE_TTL_S = 300.0
    UNDATED_S = 60.0
    """How long a token that states no expiry (an introspected one) is taken as valid before the issuer
    is asked again: for the cache, and for a stream it opens."""

    def __init__(self, settings: AuthSettings) -> None:
        self._settings = settings
        self._issuers = {i.issuer: IssuerKeys(i, settings.jwks_refresh_min_s) for i in settings.issuers}
        self._accepted: OrderedDict[str, tuple[AccessToken, float, int]] = OrderedDict()

    @property
    def issuers(self) -> list[IssuerKeys]:
        return list(self._issuers.values())

    async def validate(self, token: str) -> AccessToken:
        remembered = self._accepted.get(token)
        if remembered is not None:
            access, until, generation = remembered
            if time.monotonic() < until and generation == self._issuers[access.issuer].generation:
                self._accepted.move_to_end(token)
                return access
            del self._accepted[token]  # expired, or its issuer's keys changed since: check it afresh
        with tracing().step("check access token"):
            access = await self._validate(token)
        expires_in = self.valid_until(access) - time.time()
        until = time.monotonic() + min(expires_in, self.CACHE_TTL_S)
        self._accepted[token] = (access, until, self._issuers[access.issuer].generation)
        if len(self._accepted) > self.CACHE_SIZE:
            self._accepted.popitem(last=False)
        return access

    def valid_until(self, access: AccessToken) -> float:
        """Until when ``access``, just accepted, may be relied on (Unix time): its ``exp`` and the leeway
        (``validate`` remembers it that long, five minutes at most); for a token that states no expiry
        (an introspected one), until the issuer would be asked about it again (a revoked token is
        refused then, and its streams end)."""
        exp = _expiry(access)
        return (time.time() + self.UNDATED_S if exp is None else exp) + self._settings.leeway_s

    async def _validate(self, token: str) -> AccessToken:
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.InvalidTokenError as exc:
            if any(keys.settings.introspection is not None for keys in self._issuers.values()):
                return await self._introspect(token)
            raise TokenRejected(f"not a JWT: {exc}") from exc
        issuer = unverified.get("iss")
        keys = self._issuers.get(issuer) if isinstance(issuer, str) else None
        if keys is None:
            if not isinstance(issuer, str):  # (was "issued by None, which is not a configured issuer")
                raise TokenRejected("it names no issuer (no iss claim, or not a string)")
            raise TokenRejected(f"issued by {issuer!r}, which is not a configured issuer")
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in keys.settings.algorithms:
            allowed = ", ".join(keys.settings.algorithms)
            raise TokenRejected(f"algorithm {algorithm!r} is not accepted (allowed: {allowed})")
        kid = header.get("kid")
        key = await keys.key(kid if isinstance(kid, str) else None)
        audience = list(keys.settings.audience) or [self._settings.resource]
        try:
            claims = jwt.decode(  # the key object itself: PyJWT checks it suits the (allow-listed) algorithm
                token,
                key=key.key,
                algorithms=[algorithm],
                audience=audience,
                issuer=keys.settings.issuer,
                leeway=self._settings.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:  # InvalidKeyError too: a key of another type than the algorithm's
            raise TokenRejected(str(exc) or type(exc).__name__) from exc
        subject = claims.get("sub") if isinstance(claims.get("sub"), str) else claims.get("client_id")
        if not isinstance(subject, str) or not subject:
            raise TokenRejected("the token names no subject (sub)")
        return AccessToken(issuer=keys.settings.issuer, subject=subject, scopes=scopes_of(claims), claims=claims)

    async def _introspect(self, token: str) -> AccessToken:
        """An opaque token, asked about at each issuer that introspects (RFC 7662) until one knows it."""
        for keys in self._issuers.values():
            introspection = keys.settings.introspection
            if introspection is None:
                continue
            endpoint = await keys.introspection_endpoint()
            answer = await _request_json(
                "POST",
                endpoint,
                data={"token": token, "token_type_hint": "access_token"},
                auth=aiohttp.BasicAuth(introspection.client_id, introspection.client_secret),
            )
            if answer.get("active") is not True:
                continue
            return self._from_introspection(keys.settings, answer)
        raise TokenRejected("no issuer knows this token as an active access token")

    def _from_introspection(self, issuer: IssuerSettings, answer: dict[str, Any]) -> AccessToken:
        if "iss" in answer and answer["iss"] != issuer.issuer:
            raise TokenRejected(f"introspection names issuer {answer['iss']!r}")
        audience = set(issuer.audience) or {self._settings.resource}
        aud = answer.get("aud")
        presented = {aud} if isinstance(aud, str) else set(aud) if isinstance(aud, list) else set()
        if not presented & audience:
            raise TokenRejected("the token is not for this resource (aud)")
        exp = answer.get("exp")
        if isinstance(exp, (int, float)) and exp + self._settings.leeway_s < time.time():
            raise TokenRejected("the token has expired")
        subject = answer.get("sub") if isinstance(answer.get("sub"), str) else answer.get("client_id")
        if not isinstance(subject, str) or not subject:
            raise TokenRejected("the introspection names no subject (sub)")
        return AccessToken(issuer=issuer.issuer, subject=subject, scopes=scopes_of(answer), claims=answer)
