"""TOML configuration -> validated, frozen pydantic models.

Errors name the key path (``upstreams[1].namespace: ...``) because a config is written by hand.
``${VAR}`` expands from the environment before validation (``$${`` is a literal ``${``); a missing
variable is an error, never an empty string: a silently empty token is how secrets leak or locks open.
In an upstream, the error is that upstream's alone (it is not started); anywhere else, the config's.

The sections live in ``sections.py``, ``server.py`` and ``upstreams.py``; this module is the config as a
whole and its one public face (``__all__``).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import tomllib
from collections.abc import Mapping, Set
from pathlib import Path
from typing import Annotated, Any, get_args

from pydantic import (
    BaseModel,
    Field,
    Tag,
    ValidationError,
    model_validator,
)

from gateway.config.admin import AdminSettings
from gateway.config.limits import LimitsSettings
from gateway.config.observability import TelemetrySettings
from gateway.config.paths import anchored
from gateway.config.sections import (
    _SECRET_PATH,
    NAMESPACE_PATTERN,
    GatewaySettings,
    PolicyRules,
    _Section,
    is_loopback,
)
from gateway.config.server import (
    ASYMMETRIC_ALGORITHMS,
    AuditSettings,
    AuthSettings,
    ClaimMatch,
    Introspection,
    IssuerSettings,
    ServerSettings,
    TokenSettings,
    ViewSettings,
)
from gateway.config.upstreams import (
    ArgumentOverride,
    FilesUpstream,
    HttpUpstream,
    IconSettings,
    PromptOverride,
    StdioUpstream,
    Upstream,
    UpstreamOAuth,
)
from gateway.config.variables import expand_upstreams, expand_variables
from gateway.protocol.errors import ConfigError

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "NAMESPACE_PATTERN",
    "AdminSettings",
    "ArgumentOverride",
    "AuditSettings",
    "AuthSettings",
    "ClaimMatch",
    "ClusterSettings",
    "Config",
    "FilesUpstream",
    "GatewaySettings",
    "HttpUpstream",
    "IconSettings",
    "Introspection",
    "IssuerSettings",
    "LimitsSettings",
    "PolicyRules",
    "PromptOverride",
    "ServerSettings",
    "StdioUpstream",
    "TelemetrySettings",
    "TokenSettings",
    "Upstream",
    "UpstreamOAuth",
    "ViewSettings",
    "expand_variables",
    "is_loopback",
    "load_config",
    "parse_config",
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
    telemetry: TelemetrySettings = TelemetrySettings()
    limits: LimitsSettings = LimitsSettings()
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
        each replica may set for itself (where it listens, where it writes its audit) is left out:
        replicas on one host differ there."""
        listening = self.model_dump_json(exclude={"server": {"host": True, "port": True, "audit": {"file"}}})
        return hashlib.sha256(listening.encode()).hexdigest()[:12]

    @property
    def generation(self) -> str:
        """Identifies the upstream layout a cursor was issued under; a cursor from another layout is stale."""
        layout = "\x00".join(f"{u.namespace}:{int(u.prefix)}" for u in self.upstreams)
        return hashlib.sha256(f"{self.gateway.namespace_separator}\x00{layout}".encode()).hexdigest()[:12]


_USERINFO = re.compile(r"(://)[^/@\s]*@")


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


_STAND_INS = {"stdio": {"command": "true"}, "files": {"path": "."}}


def _stand_in(upstream: Any) -> Any:
    """What an upstream that cannot start for an unset variable is validated as: what it says but the
    settings that name a variable, with what its transport requires in their stead, never used (such
    an upstream is never started). None where its name or transport names one: it cannot stand."""
    if not isinstance(upstream, dict) or any("${" in repr(upstream.get(key)) for key in ("namespace", "transport")):
        return None
    transports = _transports().values()
    kept = {  # a key no transport has stays, to be said unknown
        key: value
        for key, value in upstream.items()
        if "${" not in repr(value) or not any(_has_key(model, key) for model in transports)
    }
    required = _STAND_INS.get(str(kept.get("transport", "stdio")), {"url": "http://unresolved.invalid/mcp"})
    return {**required, **kept}


_TOML_KINDS = {
    "tuple_type": 'should be an array, such as ["a", "b"]',
    "list_type": 'should be an array, such as ["a", "b"]',
    "set_type": 'should be an array, such as ["a", "b"]',
    "frozen_set_type": 'should be an array, such as ["a", "b"]',
    "dict_type": 'should be a table, such as { KEY = "value" }',
    "model_type": "should be a table (a [section], or { key = value })",
}
"""What a value of the wrong kind should be, in the words of the TOML file it was written in."""


def _models_in(annotation: Any) -> dict[str | None, type[BaseModel]]:
    """The config sections a field's annotation holds, by their union tag (None: untagged)."""
    found: dict[str | None, type[BaseModel]] = {}
    pending: list[tuple[Any, str | None]] = [(annotation, None)]
    while pending:
        kind, tag = pending.pop()
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            found[tag] = kind
            continue
        metadata = getattr(kind, "__metadata__", ())
        tags = [m.tag for m in metadata if isinstance(m, Tag)]
        pending.extend((arg, tags[0] if tags else tag) for arg in get_args(kind))
    return found


def _section_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The config section where the last key of ``loc`` was written (``upstreams[0]``: its transport's)."""
    model: type[BaseModel] = Config
    choices: dict[str | None, type[BaseModel]] = {}
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if choices:  # a tagged union: this part is the tag pydantic chose
            if part not in choices:
                return None
            model, choices = choices[part], {}
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        inner = _models_in(field.annotation)
        if len(inner) == 1:
            model = next(iter(inner.values()))
        elif inner:
            choices = inner
        else:
            return None
    return None if choices else model


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """A near key of the same section (``upstreams`` for ``upstream``), said after "unknown key"; on an
    upstream, the transports that have the key where its own has not (``skills_as`` on a stdio one)."""
    section, key = _section_at(loc), str(loc[-1])
    if section is None:
        return ""
    if len(loc) == 4 and loc[0] == "upstreams" and isinstance(loc[2], str):
        having = sorted({str(tag) for tag, model in _transports().items() if _has_key(model, key)})
        if having:
            kinds = " or ".join(repr(tag) for tag in having)
            return f" for transport {loc[2]!r}: it is a key of transport = {kinds} upstreams"
    keys = {field.alias or name for name, field in section.model_fields.items()} - {key}
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _transports() -> dict[str | None, type[BaseModel]]:
    """An upstream's section by its transport."""
    return _models_in(Config.model_fields["upstreams"].annotation)


def _has_key(model: type[BaseModel], key: str) -> bool:
    return any(key in (name, field.alias) for name, field in model.model_fields.items())


UNREAD_SECRET = "(not read by this command: token {index})"  # noqa: S105 - a stand-in, never a credential
"""What a ``[[server.tokens]]`` secret whose variable is unset stands as, for a command that never checks
one (``list``, ``render``, ``explain``, ``health``): its names and policies are all it reads (each its own:
tokens must be distinct)."""


def _without_unset_secrets(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    server = data.get("server")
    tokens = server.get("tokens") if isinstance(server, dict) else None
    if not isinstance(server, dict) or not isinstance(tokens, list):
        return data
    kept = []
    for index, token in enumerate(tokens):
        if isinstance(token, dict) and isinstance(token.get("token"), str):
            try:
                expand_variables(token["token"], environ)
            except ConfigError:
                token = {**token, "token": UNREAD_SECRET.format(index=index)}
        kept.append(token)
    return {**data, "server": {**server, "tokens": kept}}


def parse_config(
    data: Mapping[str, Any],
    environ: Mapping[str, str] | None = None,
    *,
    folder: Path | None = None,
    secrets_read: bool = True,
) -> Config:
    """A config from its TOML data; ``folder``: the config file's, which its relative paths mean; without
    ``secrets_read``, a token's secret may name an unset variable (a command that checks no token)."""
    environ = os.environ if environ is None else environ
    if not secrets_read:
        data = _without_unset_secrets(dict(data), environ)
    expanded, unresolved = expand_upstreams(dict(data), environ)
    if folder is not None:
        expanded = anchored(expanded, folder)
    try:
        config = _validated(expanded, unresolved.keys())
    except ValidationError as exc:
        raise _config_error(exc, unresolved) from exc
    for index, reason in unresolved.items():
        config.upstreams[index]._unresolved = reason
    return config


def _validated(expanded: dict[str, Any], unresolved: Set[int]) -> Config:
    """The config; an upstream invalid as written for want of its variables (a URL made of them) is not
    started whatever it says, and must not stop the others: it stands without the settings that name
    them (``_stand_in``). Where it cannot stand, or is wrong otherwise too, the config is refused as
    written (each problem of such an upstream said as its unset variable)."""
    try:
        return Config.model_validate(expanded)
    except ValidationError as exc:
        invalid = {loc[1] for e in exc.errors() if len(loc := e["loc"]) > 1 and loc[0] == "upstreams"} & unresolved
        if not invalid:
            raise
        upstreams = list(expanded["upstreams"])
        for index in invalid:
            upstreams[int(index)] = _stand_in(upstreams[int(index)])
        if None in upstreams:
            raise
        try:
            return Config.model_validate({**expanded, "upstreams": upstreams})
        except ValidationError:
            raise exc from None


def _config_error(exc: ValidationError, unresolved: Mapping[int, str]) -> ConfigError:
    """Every problem pydantic found, in the words of the TOML file it was written in; one in an upstream
    that names an unset variable, as that variable (what is wrong with it as written follows from it)."""
    problems = []
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        if len(loc) > 1 and loc[0] == "upstreams" and isinstance(loc[1], int) and loc[1] in unresolved:
            if unresolved[loc[1]] not in problems:
                problems.append(unresolved[loc[1]])
            continue
        # pydantic says "a valid tuple" and "a valid dictionary"; the TOML file, array and table
        message = _TOML_KINDS.get(error["type"]) or str(error["msg"]).removeprefix("Value error, ")
        where = _key_path(loc)
        if error["type"] == "extra_forbidden":
            message = "unknown key" + _did_you_mean(loc)
        elif error["type"] == "union_tag_invalid":
            message = f"transport {error['ctx']['tag']!r} is not one of {error['ctx']['expected_tags']}"
        elif error["type"] == "string_pattern_mismatch" and where.endswith("namespace"):
            message = f"{error['input']!r} is not a valid namespace: use letters, digits, '_' and '-' only"
        elif isinstance(error.get("input"), (str, int, float)) and not _SECRET_PATH.search(where):
            shown = (
                _USERINFO.sub(r"\1[redacted]@", error["input"]) if isinstance(error["input"], str) else error["input"]
            )
            message = f"{message} (got {shown!r})"  # secrets are never echoed, nor a URL's password
        problems.append(f"{where}: {message}" if where else message)
    return ConfigError("invalid configuration:\n  " + "\n  ".join(problems))


def load_config(path: str | Path, environ: Mapping[str, str] | None = None, *, secrets_read: bool = True) -> Config:
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
    return parse_config(data, environ, folder=Path(path).absolute().parent, secrets_read=secrets_read)
