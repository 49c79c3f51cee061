"""TOML configuration -> validated, frozen pydantic models.

Errors name the key path (``upstreams[1].namespace: ...``) because a config is written by hand.
``${VAR}`` expands from the environment before validation (``$${`` is a literal ``${``); a missing
variable is an error, never an empty string: a silently empty token is how secrets leak or locks open.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from gateway.protocol.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

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


class TokenSettings(_Section):
    """A front-end bearer token; its policy applies on top of the global one for the clients using it."""

    name: str = Field(pattern=NAMESPACE_PATTERN, max_length=64)
    token: str = Field(min_length=16)
    policy: PolicyRules = PolicyRules()


ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


class Introspection(_Section):
    """Opaque (non-JWT) access tokens, asked about at the issuer's introspection endpoint (RFC 7662) with
    the gateway's own client credentials; ``endpoint`` unset: the one the issuer's metadata names."""

    client_id: str = Field(min_length=1)
    client_secret: str = Field(min_length=1)
    endpoint: str | None = Field(None, pattern=r"^https?://")


class IssuerSettings(_Section):
    """An authorization server whose access tokens the gateway accepts: JWTs, checked against its keys
    (found by discovery, RFC 8414 then OpenID Connect, unless ``jwks_uri`` names them), and with
    ``introspection`` opaque tokens too."""

    issuer: str = Field(pattern=r"^https?://")
    audience: tuple[str, ...] = ()
    jwks_uri: str | None = Field(None, pattern=r"^https?://")
    introspection: Introspection | None = None
    algorithms: tuple[Literal[ASYMMETRIC_ALGORITHMS], ...] = Field(("RS256", "PS256", "ES256", "EdDSA"), min_length=1)  # type: ignore[valid-type]


class AuthSettings(_Section):
    """The HTTP front end as an OAuth 2.1 resource server (MCP authorization). ``resource`` is the MCP
    endpoint's public URL: tokens must be issued for it (their ``aud``, RFC 8707), and the protected
    resource metadata (RFC 9728) names it."""

    resource: str = Field(pattern=r"^https?://[^#]+$")
    issuers: tuple[IssuerSettings, ...] = Field(min_length=1)
    scopes_required: tuple[str, ...] = ()
    scopes_supported: tuple[str, ...] = ()
    leeway_s: float = Field(30.0, ge=0, le=300)
    jwks_refresh_min_s: float = Field(60.0, ge=0, le=86_400)


class ClaimMatch(_Section):
    """Which tokens a view applies to: ``claim`` (a dotted path into the token) holding any of ``any_of``,
    none of ``none_of``, or a string ending with ``ends_with`` (an e-mail domain). A string claim is one
    value (``scope`` and ``scp`` are split on spaces); an array, its strings."""

    claim: str = Field(pattern=r"^[A-Za-z0-9_:/.-]+$", max_length=256)
    any_of: tuple[str, ...] = ()
    none_of: tuple[str, ...] = ()
    ends_with: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one_test(self) -> ClaimMatch:
        tests = [bool(self.any_of), bool(self.none_of), self.ends_with is not None]
        if sum(tests) != 1:
            raise ValueError("give exactly one of any_of, none_of, ends_with")
        return self


class ViewSettings(_Section):
    """A policy for the people whose token matches: it narrows the global policy (deny wins)."""

    name: str = Field(pattern=NAMESPACE_PATTERN, max_length=64)
    match: ClaimMatch
    policy: PolicyRules


class AuditSettings(_Section):
    """One ``audit`` event per get, completion and refused request: to the log, or to a JSONL file."""

    file: str | None = None
    argument_values: bool = False


class ServerSettings(_Section):
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    path: str = Field("/mcp", pattern=r"^/[A-Za-z0-9/_.-]*$")
    sse_path: str = Field("/sse", pattern=r"^/[A-Za-z0-9/_.-]*$")
    messages_path: str = Field("/messages", pattern=r"^/[A-Za-z0-9/_.-]*$")
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    tokens: tuple[TokenSettings, ...] = ()
    auth: AuthSettings | None = None
    views: tuple[ViewSettings, ...] = ()
    audit: AuditSettings = AuditSettings()
    prompts_as_tools: bool = False
    allow_unauthenticated: bool = False
    max_sessions: int = Field(10_000, ge=1)
    max_sessions_per_identity: int | None = Field(None, ge=1)
    session_idle_timeout_s: float = Field(3600, gt=0)
    max_connections: int = Field(1000, ge=1)
    max_connections_per_client: int = Field(250, ge=1)
    max_header_bytes: int = Field(64 * 1024, ge=1024, le=16 * 1024 * 1024)
    header_timeout_s: float = Field(10.0, gt=0, le=3600)
    body_timeout_s: float = Field(30.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _views_need_tokens_to_look_at(self) -> ServerSettings:
        if self.views and self.auth is None:
            raise ValueError("server.views match token claims: configure [server.auth] issuers too")
        if len({v.name for v in self.views}) != len(self.views):
            raise ValueError("server.views: view names must be unique")
        return self

    @model_validator(mode="after")
    def _tokens_are_distinct(self) -> ServerSettings:
        names = [t.name for t in self.tokens]
        if len(set(names)) != len(names):
            raise ValueError("server.tokens: token names must be unique")
        if len({t.token for t in self.tokens}) != len(self.tokens):
            raise ValueError("server.tokens: two tokens have the same value")
        return self

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


def _public_name(value: str) -> str:
    if not value.isprintable() or any(ch.isspace() for ch in value):
        raise ValueError("a prompt name is printable and has no spaces")
    return value


PromptName = Annotated[str, Field(min_length=1, max_length=256)]


class ArgumentOverride(_Section):
    """One argument of an upstream prompt as the gateway lists it: its description, and a default the
    gateway fills in when the client leaves the argument out (the argument then lists as optional)."""

    description: str | None = Field(None, max_length=4096)
    default: str | None = Field(None, max_length=65_536)


class IconSettings(_Section):
    """An icon as MCP lists it (2025-11-25): where it is, its type, its sizes, the theme it suits."""

    src: str = Field(pattern=r"^(https://|data:image/)", max_length=1_000_000)
    mime_type: str | None = Field(None, pattern=r"^image/[A-Za-z0-9.+-]+$")
    sizes: tuple[Annotated[str, Field(pattern=r"^(any|[0-9]+x[0-9]+)$")], ...] = ()
    theme: Literal["light", "dark"] | None = None

    def listed(self) -> dict[str, Any]:
        icon: dict[str, Any] = {"src": self.src}
        if self.mime_type is not None:
            icon["mimeType"] = self.mime_type
        if self.sizes:
            icon["sizes"] = list(self.sizes)
        if self.theme is not None:
            icon["theme"] = self.theme
        return icon


class PromptOverride(_Section):
    """How one upstream prompt is shown (docs/catalog.md): keyed by the upstream's own name for it."""

    name: PromptName | None = None
    title: str | None = Field(None, max_length=1024)
    description: str | None = Field(None, max_length=65_536)
    description_append: str | None = Field(None, max_length=65_536)
    arguments: dict[str, ArgumentOverride] = Field(default_factory=dict)
    fixed: dict[str, str] = Field(default_factory=dict)
    icons: tuple[IconSettings, ...] | None = Field(None, max_length=16)
    tags: tuple[Annotated[str, Field(min_length=1, max_length=64)], ...] = Field((), max_length=64)

    @field_validator("name")
    @classmethod
    def _printable_name(cls, value: str | None) -> str | None:
        return value if value is None else _public_name(value)

    @model_validator(mode="after")
    def _fixed_is_not_also_listed(self) -> PromptOverride:
        both = sorted(set(self.fixed) & set(self.arguments))
        if both:
            raise ValueError(f"argument {both[0]!r} is fixed (hidden from clients): it cannot also be described")
        return self


class _UpstreamSettings(_Section):
    """What every kind of upstream has: where its prompts are named, what of them shows, and how."""

    namespace: str = Field(pattern=NAMESPACE_PATTERN, max_length=64)
    prefix: bool = True
    policy: PolicyRules = PolicyRules()
    overrides: dict[str, PromptOverride] = Field(default_factory=dict, max_length=10_000)

    @property
    def connection(self) -> _UpstreamSettings:
        """These settings without what only shapes the listing: a change here needs a reconnect."""
        return self.model_copy(update={"policy": PolicyRules(), "overrides": {}})


class StdioUpstream(_UpstreamSettings):
    transport: Literal["stdio"] = "stdio"
    command: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    env_file: str | None = None
    """More variables for the server, from a dotenv file read each time it starts (``env`` wins)."""
    cwd: str | None = None
    timeout_s: float = Field(30.0, gt=0, le=3600)
    protocol: Literal["auto", "modern", "legacy"] = "auto"


class UpstreamOAuth(_Section):
    """The gateway's own token for an upstream that is a protected resource itself: OAuth client
    credentials (RFC 6749 4.4) at ``token_url``, for ``resource`` (RFC 8707; default the upstream URL)."""

    token_url: str = Field(pattern=r"^https?://")
    client_id: str = Field(min_length=1)
    client_secret: str = Field(min_length=1)
    scope: str | None = None
    resource: str | None = Field(None, pattern=r"^https?://")


class HttpUpstream(_UpstreamSettings):
    """A remote upstream. ``proxy`` unset follows the environment (``HTTPS_PROXY``, ``NO_PROXY``...) as
    curl does; ``"none"`` connects directly. ``ca_file`` trusts a private CA; ``client_cert`` (with
    ``client_key`` unless the PEM holds both) answers a server that requires a client certificate."""

    transport: Literal["streamable-http", "sse"]
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(30.0, gt=0, le=3600)
    connect_timeout_s: float = Field(10.0, gt=0, le=600)
    read_timeout_s: float | None = Field(None, gt=0, le=86_400)
    proxy: str | None = Field(None, pattern=r"^(none|https?://.+)$")
    verify: bool = True
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    oauth: UpstreamOAuth | None = None
    protocol: Literal["auto", "modern", "legacy"] = "auto"

    @model_validator(mode="after")
    def _tls_settings_agree(self) -> HttpUpstream:
        if not self.verify and self.ca_file is not None:
            raise ValueError("ca_file is set but verify = false turns certificate checks off: choose one")
        if self.client_key is not None and self.client_cert is None:
            raise ValueError("client_key is set without client_cert")
        for key in ("ca_file", "client_cert", "client_key"):
            path = getattr(self, key)
            if path is not None and not Path(path).is_file():
                raise ValueError(f"{key}: no such file {path!r}")
        return self


class FilesUpstream(_UpstreamSettings):
    """Prompts kept in files: every ``*.md`` under ``path`` (docs/catalog.md), watched for edits."""

    transport: Literal["files"]
    path: str = Field(min_length=1)
    watch: bool = True
    format: Literal["auto", "claude-code", "claude-plugin", "vscode", "template"] = "auto"
    """What the directory holds: ``auto`` reads each file by its name and place (``.claude/commands/``
    and a directory inside one: Claude Code's commands; a Claude Code plugin's ``commands/`` and
    ``skills/``; ``*.prompt.md``: VS Code's; else templates)."""


def _transport_of(value: Any) -> str:
    if isinstance(value, dict):
        transport = value.get("transport", "stdio")
        return transport if isinstance(transport, str) else ""
    return str(getattr(value, "transport", ""))


Upstream = Annotated[
    Annotated[StdioUpstream, Tag("stdio")]
    | Annotated[HttpUpstream, Tag("streamable-http")]
    | Annotated[HttpUpstream, Tag("sse")]
    | Annotated[FilesUpstream, Tag("files")],
    Discriminator(_transport_of),
]


class ClusterSettings(_Section):
    """Several replicas serving one endpoint (docs/scaling.md). ``session_keys``: seal session ids so any
    replica holding them serves any session (the first seals, all open); ``redis_url``: share what
    sealed ids cannot carry (ended sessions, cancellations, legacy streams) through Redis."""

    session_keys: tuple[Annotated[str, Field(min_length=16)], ...] = Field((), max_length=16)
    session_ttl_s: float = Field(86_400.0, gt=0, le=30 * 86_400)
    redis_url: str | None = Field(None, pattern=r"^(rediss?|unix)://")
    heartbeat_s: float = Field(10.0, gt=0, le=600)


class Config(_Section):
    gateway: GatewaySettings = GatewaySettings()
    server: ServerSettings = ServerSettings()
    cluster: ClusterSettings = ClusterSettings()
    upstreams: tuple[Upstream, ...] = ()
    policy: PolicyRules = PolicyRules()

    @model_validator(mode="after")
    def _namespaces_are_unambiguous(self) -> Config:
        sep = self.gateway.namespace_separator
        seen: set[str] = set()
        for index, upstream in enumerate(self.upstreams):
            where = f"upstreams[{index}].namespace"
            if upstream.namespace in seen:
                raise ValueError(f"{where}: {upstream.namespace!r} is used by an earlier upstream")
            seen.add(upstream.namespace)
            # The separator may occur in "<namespace><sep>" only as the separator itself: then the
            # first occurrence in a prefixed name always ends the namespace, and prefixed names of
            # different upstreams can never collide ("a_" + "__" would read as "a" + "__" + "_...").
            if (upstream.namespace + sep).find(sep) != len(upstream.namespace):
                raise ValueError(
                    f"{where}: {upstream.namespace!r} may not contain or end in part of the namespace separator {sep!r}"
                )
        return self

    @model_validator(mode="after")
    def _renames_are_distinct(self) -> Config:
        taken: dict[str, str] = {}
        for index, upstream in enumerate(self.upstreams):
            for local, override in upstream.overrides.items():
                if override.name is None:
                    continue
                where = f"upstreams[{index}].overrides.{local}.name"
                if override.name in taken:
                    raise ValueError(f"{where}: {override.name!r} is already the name of {taken[override.name]}")
                taken[override.name] = f"{upstream.namespace}'s {local!r}"
        return self

    @property
    def digest(self) -> str:
        """Tells configs apart (replicas compare theirs through Redis); secrets go in only hashed. What
        each replica may set for itself (where it listens) is left out: replicas on one host differ there."""
        listening = self.model_dump_json(exclude={"server": {"host", "port"}})
        return hashlib.sha256(listening.encode()).hexdigest()[:12]

    @property
    def generation(self) -> str:
        """Identifies the upstream layout a cursor was issued under; a cursor from another layout is stale."""
        layout = "\x00".join(f"{u.namespace}:{int(u.prefix)}" for u in self.upstreams)
        return hashlib.sha256(f"{self.gateway.namespace_separator}\x00{layout}".encode()).hexdigest()[:12]


def expand_variables(value: Any, environ: Mapping[str, str], path: str = "") -> Any:
    """Replace ``${VAR}`` in every string of a parsed TOML tree."""
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name is None:
                return "$"
            if name not in environ:
                if default is not None:
                    return default
                raise ConfigError(f"{path or '(root)'}: environment variable {name} is not set")
            return environ[name]

        return _VARIABLE.sub(substitute, value)
    if isinstance(value, dict):
        return {k: expand_variables(v, environ, f"{path}.{k}" if path else k) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_variables(v, environ, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def _key_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("stdio", "streamable-http", "sse", "files") or str(part).startswith("function-"):
            continue  # the discriminator's tag is not a key the user wrote
        else:
            out += f".{part}" if out else str(part)
    return out


def parse_config(data: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Config:
    expanded = expand_variables(dict(data), os.environ if environ is None else environ)
    try:
        return Config.model_validate(expanded)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            message = str(error["msg"]).removeprefix("Value error, ")
            where = _key_path(tuple(error["loc"]))
            if error["type"] == "extra_forbidden":
                message = "unknown key"
            elif error["type"] == "union_tag_invalid":
                message = f"transport {error['ctx']['tag']!r} is not one of {error['ctx']['expected_tags']}"
            elif error["type"] == "string_pattern_mismatch" and where.endswith("namespace"):
                message = f"{error['input']!r} is not a valid namespace: use letters, digits, '_' and '-' only"
            elif isinstance(error.get("input"), (str, int, float)) and not _SECRET_PATH.search(where):
                message = f"{message} (got {error['input']!r})"  # secrets are never echoed
            problems.append(f"{where}: {message}" if where else message)
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems)) from exc


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> Config:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    if not data:  # most often a file caught mid-write (editors and `>` truncate first): never "stop everything"
        raise ConfigError(f"{path}: the file is empty; a configuration has at least one table or key")
    return parse_config(data, environ)
