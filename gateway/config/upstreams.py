"""``[[upstreams]]``: a server over stdio, Streamable HTTP or SSE, or a directory of prompt files, and the
overrides that reshape an upstream's prompts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from gateway.config.sections import NAMESPACE_PATTERN, PolicyRules, _Section


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
    _unresolved: str | None = PrivateAttr(None)

    @property
    def unresolved(self) -> str | None:
        """Why this upstream cannot be started (a ``${VAR}`` in it is unset), or None: it alone fails,
        as a failing upstream degrades only its own prompts; set by ``parse_config``."""
        return self._unresolved

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
    max_in_flight: int | None = Field(None, ge=1, le=100_000)
    """Requests in flight to this server at most (more are refused at once, -32603); unset:
    ``[gateway] max_requests_per_upstream``. A slow server then holds only its own share."""
    protocol: Literal["auto", "modern", "legacy"] = "auto"
    relay_skills: bool = False
    """Relay the server's Agent Skills (SEP-2640) when it declares the Skills extension, under
    ``skill://<namespace>/...``, each file checked against its manifest's digest (``docs/skills.md``)."""

    @field_validator("command", "args", "cwd")
    @classmethod
    def _no_nul(cls, value: str | tuple[str, ...] | None) -> str | tuple[str, ...] | None:
        """A NUL byte cannot reach a process (the C strings end there): under uvloop the server started
        with the text cut short, elsewhere its start failed each time; refused here, where it can be named."""
        for text in (value,) if isinstance(value, str) else value or ():
            if "\x00" in text:
                raise ValueError("holds a NUL byte (\\u0000), which cannot be passed to a process")
        return value

    @field_validator("env")
    @classmethod
    def _environment_passes(cls, value: dict[str, str]) -> dict[str, str]:
        """The same for the environment, and a name with ``=`` (it would end the name early)."""
        for name, text in value.items():
            if not name or "=" in name or "\x00" in name:
                raise ValueError(f"{name!r} is not a variable name (empty, or holding = or a NUL byte)")
            if "\x00" in text:
                raise ValueError(f"{name} holds a NUL byte (\\u0000), which cannot be passed to a process")
        return value


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
    max_in_flight: int | None = Field(None, ge=1, le=100_000)
    """Requests in flight to this server at most (more are refused at once, -32603); unset:
    ``[gateway] max_requests_per_upstream``. A slow server then holds only its own share."""
    connect_timeout_s: float = Field(10.0, gt=0, le=600)
    read_timeout_s: float | None = Field(None, gt=0, le=86_400)
    proxy: str | None = Field(None, pattern=r"^(none|https?://.+)$")
    verify: bool = True
    ca_file: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    oauth: UpstreamOAuth | None = None
    protocol: Literal["auto", "modern", "legacy"] = "auto"
    relay_skills: bool = False
    """Relay the server's Agent Skills (SEP-2640) when it declares the Skills extension, under
    ``skill://<namespace>/...``, each file checked against its manifest's digest (``docs/skills.md``)."""

    @field_validator("url")
    @classmethod
    def _url_parses(cls, value: str) -> str:
        """A URL the HTTP client cannot parse (``http://[::1/mcp``, a port past 65535) raised inside the
        connection, not here."""
        parts = urlsplit(value)  # raises ValueError for a bracket left open
        if not parts.hostname:
            raise ValueError("the URL has no host")
        _ = parts.port  # raises ValueError for a port that is not a number up to 65535
        return value

    @field_validator("headers")
    @classmethod
    def _one_authorization(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        """The HTTP client refuses a request with both an Authorization header and credentials in the URL
        (it would have to choose one): refused here, where the key can be named."""
        url = info.data.get("url")
        if isinstance(url, str) and _has_credentials(url) and any(k.lower() == "authorization" for k in value):
            raise ValueError(
                "an Authorization header cannot go with credentials in url (user:password@): keep one of them"
            )
        return value

    @field_validator("oauth")
    @classmethod
    def _oauth_alone(cls, value: UpstreamOAuth | None, info: ValidationInfo) -> UpstreamOAuth | None:
        """The gateway's own token is its Authorization: beside credentials in the URL the HTTP client
        refuses each request, and beside an Authorization header one of the two would be dropped."""
        if value is None:
            return value
        url, headers = info.data.get("url"), info.data.get("headers") or {}
        if isinstance(url, str) and _has_credentials(url):
            raise ValueError(
                "the gateway's own token (oauth) cannot go with credentials in url (user:password@): keep one"
            )
        if any(key.lower() == "authorization" for key in headers):
            raise ValueError("the gateway's own token (oauth) cannot go with an Authorization header: keep one")
        return value

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


def _has_credentials(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False  # refused for itself (``url``)
    return parts.username is not None or parts.password is not None


class FilesUpstream(_UpstreamSettings):
    """Prompts kept in files: every ``*.md`` under ``path`` (docs/catalog.md), watched for edits."""

    transport: Literal["files"]
    path: str = Field(min_length=1)
    watch: bool = True
    format: Literal["auto", "claude-code", "claude-plugin", "vscode", "template"] = "auto"
    """What the directory holds: ``auto`` reads each file by its name and place (``.claude/commands/``
    and a directory inside one: Claude Code's commands; a Claude Code plugin's ``commands/`` and
    ``skills/``; ``*.prompt.md``: VS Code's; else templates)."""
    skills_as: Literal["prompts", "skills", "both"] = "prompts"
    """How skill folders (``.claude/skills/<name>/SKILL.md``, a plugin's ``skills/``) are served: as
    prompts, as Agent Skills over the Skills extension (``docs/skills.md``), or both."""


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
