"""An MCP upstream's skills, relayed (SEP-2640): what it lists with ``skills/list``, served under the
gateway's namespaced URIs, its files read from it on demand and checked against its own manifest.

The upstream's ``skill://<skill path>/<file>`` is the gateway's ``skill://<namespace>/<skill path>/<file>``
(the spec lets a server choose any prefix, and a skill URI is scoped to the server that serves it:
two upstreams' ``skill://pdf/SKILL.md`` are two skills, ``skill://a/pdf`` and ``skill://b/pdf`` here).
Entries are held in the shape the gateway's own skill folders have (``LocalSkill``) without their
bytes, so policy, views, listing and directory reads treat both alike; ``resources/read`` asks the
upstream for a file and passes its bytes on only when their SHA-256 digest and size are the manifest's.

Only what the spec allows is relayed: an entry that breaks the spec's rules (``protocol/skills.py``),
a skill under another scheme than ``skill://``, or one whose resources are ``"dynamic"`` (nothing to
check its bytes against) is left out and logged. Manifests are cached (``RelayedSkills``), and asked for
afresh when the upstream announces a change (``notifications/resources/list_changed``), so an upstream's
changed file changes the digest the gateway announces with it.
"""

from __future__ import annotations

import base64
import binascii
import math
import mimetypes
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote

import anyio
import structlog
from pydantic import ValidationError

from gateway.protocol.errors import DigestMismatch, UpstreamError, UpstreamProtocolError
from gateway.protocol.models import describe
from gateway.protocol.skills import (
    LIST_METHOD,
    SCHEME,
    SKILL_FILE,
    SKILL_MIME_TYPE,
    ListSkillsResult,
    Skill,
    declares_extension,
    digest_of,
    plain_skill_path,
)

if TYPE_CHECKING:
    from gateway.sources.files.skills import LocalSkill, SkillFile

log = structlog.get_logger("gateway.skills")

MAX_PAGES = 100
"""Pages of one upstream's ``skills/list`` read at most, so that a server paging for ever cannot hold a
request (its skills beyond are not relayed)."""
MAX_CACHED_S = 600.0
"""How long a relayed manifest is held at most, even from an upstream that announces its changes (a
notification lost on the way delays a change this long, never longer)."""
UNANNOUNCED_S = 5.0
"""How long a manifest is held from an upstream that neither announces changes nor gives a ``ttlMs``:
the requests of one use of a skill (list, get, each file) ask for it once."""
MAX_TOLD = 1024
"""Refusals remembered as said (``RelayedSkills._refused``); past it, said again."""


class Upstream(Protocol):
    namespace: str
    capabilities: dict[str, Any]

    @property
    def ready(self) -> bool: ...

    async def request(
        self, method: str, params: dict[str, Any] | None, *, check: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]: ...


class RelayedSkills:
    """One upstream's skills as the skill catalog sees a source of them.

    Its manifests are cached (``refresh`` asks again only when they are stale): until ``invalidate``
    (the upstream's ``notifications/resources/list_changed``, a connect or a disconnect) when it
    announces its changes, for the ``ttlMs`` its listing gave otherwise, and for ``UNANNOUNCED_S``
    when it gives neither. Each bounded by ``MAX_CACHED_S``."""

    offers_skills = True

    def __init__(self, upstream: Upstream, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._upstream = upstream
        self.namespace = upstream.namespace
        self.skills: dict[str, LocalSkill] = {}
        self._clock = clock
        self._fresh_until = -math.inf
        self._epoch = 0  # moved on by each invalidation: a fetch begun before one is not cached
        self._fetching = anyio.Lock()  # one fetch at a time: requests that wait for it share its answer
        self._told: set[tuple[str, str, str]] = set()  # entries refused and said so (each said once)

    @property
    def ready(self) -> bool:
        return self._upstream.ready

    @property
    def declares(self) -> bool:
        return self._upstream.ready and declares_extension(self._upstream.capabilities)

    @property
    def fresh(self) -> bool:
        return self._clock() < self._fresh_until

    def invalidate(self) -> None:
        self._epoch += 1
        self._fresh_until = -math.inf

    async def refresh(self, *, force: bool = False) -> None:
        """The upstream's skills, asked for when what is held is stale (or ``force``). An upstream down,
        or not declaring the extension, has none (its own skills only: the others are served as before)."""
        if not self.declares:
            self.skills, self._fresh_until = {}, -math.inf
            return
        if self.fresh and not force:
            return
        async with self._fetching:
            if self.fresh and not force:  # fetched by the request this one waited for
                return
            await self._fetch()

    async def _fetch(self) -> None:
        epoch = self._epoch
        found: dict[str, LocalSkill] = {}
        cursor: str | None = None
        ttls: list[float] = []
        try:
            for _ in range(MAX_PAGES):
                raw = await self._upstream.request(LIST_METHOD, {"cursor": cursor} if cursor else None)
                page = ListSkillsResult.model_validate(raw)
                if page.ttlMs is not None:
                    ttls.append(max(0.0, float(page.ttlMs)))
                for item in page.skills:
                    skill = self._relayable(item)
                    if skill is None:
                        continue
                    if skill.path in found:  # the upstream lists a skill twice: the first entry is the one
                        self._refused(
                            "upstream_skill_not_relayed", "listed again (the first entry is served)", skill.source
                        )
                        continue
                    found[skill.path] = skill
                cursor = page.nextCursor
                if not cursor:
                    break
        except (UpstreamError, ValidationError) as exc:
            why = describe(exc) if isinstance(exc, ValidationError) else str(exc)
            log.warning("upstream_skills_unavailable", upstream=self.namespace, reason=why[:300])
            self.skills, self._fresh_until = {}, -math.inf
            return
        self.skills = found
        if self._epoch == epoch:  # no change announced meanwhile: what was read may be held
            self._fresh_until = self._clock() + self._lifetime_s(min(ttls) / 1000 if ttls else None)

    def _refused(self, event: str, reason: str, skill: str = "") -> None:
        """Say why an entry is left out, once: the manifests are asked for again every few seconds (a
        silent upstream's), and the same refusals filled the log at each. Bounded: forgotten when full."""
        told = (event, reason, skill)
        if told in self._told:
            return
        if len(self._told) >= MAX_TOLD:
            self._told.clear()
        self._told.add(told)
        fields = {"skill": skill[:512]} if skill else {}
        log.warning(event, upstream=self.namespace, reason=reason, **fields)

    def _lifetime_s(self, ttl_s: float | None) -> float:
        if getattr(self._upstream, "announces_resource_changes", False):
            return MAX_CACHED_S
        return UNANNOUNCED_S if ttl_s is None else min(ttl_s, MAX_CACHED_S)

    def _relayable(self, item: Any) -> LocalSkill | None:
        from gateway.sources.files.skills import LocalSkill, SkillFile  # YAML: only where skills are served

        if not isinstance(item, dict):
            self._refused("upstream_skill_refused", "an entry is not an object")
            return None
        try:
            skill = Skill.model_validate(item)
        except ValidationError as exc:
            self._refused("upstream_skill_refused", describe(exc)[:300])
            return None
        if not skill.uri.startswith(SCHEME) or not isinstance(skill.resources, list):
            why = "not under skill://" if not skill.uri.startswith(SCHEME) else "its resources are dynamic"
            self._refused("upstream_skill_not_relayed", why, skill.uri)
            return None
        root = skill.uri[: -len(SKILL_FILE) - 1]
        if not plain_skill_path(root[len(SCHEME) :]):  # (its URIs would need escaping, spelt two ways)
            why = "its folders are not plain URI segments (letters, digits, '.', '_', '~', '-')"
            self._refused("upstream_skill_not_relayed", why, skill.uri)
            return None
        files = {  # by path, as the gateway's own are (its URIs escape it again, the upstream's way or not)
            path: SkillFile(path, b"", r.digest, _mime_type(r.uri), relayed_from=r.uri, declared_size=r.size)
            for r in skill.resources
            for path in (unquote(r.uri[len(root) + 1 :], errors="surrogateescape"),)
        }
        if len(files) != len(skill.resources) or files.get(SKILL_FILE) is None:
            why = "it lists a file twice, spelt two ways"  # (SKILL%2Emd beside SKILL.md: one would hide the other)
            self._refused("upstream_skill_not_relayed", why, skill.uri)
            return None
        folders = {"/".join(p.split("/")[: i + 1]) for p in files for i in range(p.count("/"))}
        frontmatter = dict(item["frontmatter"])
        return LocalSkill(root[len(SCHEME) :], skill.uri, frontmatter, files, frozenset({"", *folders}))

    async def read(self, uri: str, file: SkillFile) -> dict[str, Any]:
        """The file's ``resources/read`` contents from the upstream, under the gateway's ``uri``, once
        its bytes are checked against the manifest (DigestMismatch, logged, if they are not: checked
        within the request's CLIENT span, which records it as ``digest_mismatch``)."""
        assert file.relayed_from is not None  # noqa: S101 - only relayed files are read here
        checked: list[dict[str, Any]] = []

        def check(raw: dict[str, Any]) -> None:
            checked.append(self._checked(uri, file, raw))

        await self._upstream.request("resources/read", {"uri": file.relayed_from}, check=check)
        return checked[0]

    def _checked(self, uri: str, file: SkillFile, raw: dict[str, Any]) -> dict[str, Any]:
        assert file.relayed_from is not None  # noqa: S101 - only relayed files are read here
        found = raw.get("contents")
        item = found[0] if isinstance(found, list) and len(found) == 1 and isinstance(found[0], dict) else None
        data = None if item is None or item.get("uri") != file.relayed_from else _bytes_of(item)
        if item is None or data is None:
            raise UpstreamProtocolError(
                self.namespace, f"answered resources/read of {file.relayed_from} without that one file's contents"
            )
        if len(data) != file.size or digest_of(data) != file.digest:
            log.warning(
                "skill_digest_mismatch",
                upstream=self.namespace,
                skill_file=uri[:512],
                manifest_digest=file.digest,
                manifest_size=file.size,
                digest=digest_of(data),
                size=len(data),
            )
            differ = (
                f"{len(data)} bytes where it lists {file.size}"
                if len(data) != file.size
                else "the same size, another sha256 digest"
            )
            problem = f"sent {file.relayed_from} with bytes that do not match its manifest ({differ}): refused"
            raise DigestMismatch(self.namespace, problem)
        relayed = {k: v for k, v in item.items() if k in ("mimeType", "text", "blob", "_meta")}
        return {"uri": uri, **relayed}


def _bytes_of(item: Mapping[str, Any]) -> bytes | None:
    """A resource's raw bytes: its text's UTF-8, or its blob decoded."""
    if isinstance(item.get("text"), str):
        return str(item["text"]).encode("utf-8")
    if isinstance(item.get("blob"), str):
        try:
            return base64.b64decode(str(item["blob"]), validate=True)
        except (binascii.Error, ValueError):
            return None
    return None


def _mime_type(uri: str) -> str:
    if uri.endswith("/" + SKILL_FILE):
        return SKILL_MIME_TYPE
    return mimetypes.guess_type(uri.rsplit("/", 1)[-1])[0] or "application/octet-stream"
