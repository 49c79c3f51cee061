"""The skills the gateway serves (SEP-2640), beside its prompts: every upstream's skills under one
endpoint, as the catalog serves their prompts.

A skill's URI carries its upstream's namespace as its first segment, ``skill://<namespace>/<skill
path>/<file>``, whatever the upstream calls it: the spec lets a server put any prefix before the skill's
name, so two upstreams' ``pdf`` skills are ``skill://a/pdf`` and ``skill://b/pdf``, and a URI alone says
which upstream a read goes to. The namespace is always there (``prefix = false`` unprefixes prompt
names only): a skill URI must route.

Listing pages every skill in config order under the composite cursor (``cursor.py``, sealed and bound
to this layout and to skills: a prompt listing's cursor is refused here). ``resources/list`` lists
every file of every skill; ``resources/directory/read`` every folder of them, the namespace's root and
the folders before a skill's name included. Each answer is what the gateway holds now: a file that
changed on disk changes its digest in the next answer and its bytes with it, never one without the
other.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from gateway.catalog.cursor import START, CursorCodec, ListingPosition, PagePosition
from gateway.catalog.explain import Explanation, Layer, explain_skill
from gateway.catalog.mounts import Mount
from gateway.catalog.policy import ALLOW_ALL, Rules, Viewer
from gateway.catalog.relayed_skills import RelayedSkills, Upstream
from gateway.protocol.errors import DigestMismatch, InvalidParams, shown
from gateway.protocol.models import parse_params
from gateway.protocol.skills import (
    DIRECTORY_MIME_TYPE,
    SCHEME,
    SKILL_FILE,
    GetSkillParams,
    ListSkillsParams,
    ReadDirectoryParams,
    ReadResourceParams,
    file_path_of,
    file_uri_path,
    split_skill_uri,
)

if TYPE_CHECKING:
    from gateway.sources.files.skills import LocalSkill, SkillFile

DEFAULT_PAGE_SIZE = 100


class SkillSource(Protocol):
    """What a source that serves skills has (the files source; a relaying upstream later)."""

    namespace: str
    offers_skills: bool
    skills: Mapping[str, LocalSkill]

    @property
    def ready(self) -> bool: ...


class SkillCatalog:
    def __init__(
        self,
        mounts: Sequence[Mount],
        *,
        codec: CursorCodec,
        generation: str,
        page_size: int | None = None,
        ttl_ms: int = 60_000,
        policy: Rules = ALLOW_ALL,
    ) -> None:
        self._mounts = {m.namespace: m for m in mounts if getattr(m.source, "offers_skills", False) or _relays(m)}
        self._relayed = {m.namespace: RelayedSkills(cast(Upstream, m.source)) for m in mounts if _relays(m)}
        self._sources: dict[str, SkillSource] = {
            ns: cast(SkillSource, self._relayed.get(ns) or m.source) for ns, m in self._mounts.items()
        }
        self._policy = policy
        self._codec = codec
        self._generation = generation + "|skills"  # a cursor of another listing is not one of these
        self._page_size = page_size or DEFAULT_PAGE_SIZE
        self.ttl_ms = ttl_ms

    async def _refresh(self, namespace: str | None = None) -> None:
        """Relayed upstreams' manifests (one's, or all) asked for where those held are stale."""
        for ns, relayed in self._relayed.items():
            if namespace is None or ns == namespace:
                await relayed.refresh()

    def invalidate(self, namespace: str) -> None:
        """A relayed upstream changed (its list_changed, a connect, a disconnect): its manifests are stale."""
        relayed = self._relayed.get(namespace)
        if relayed is not None:
            relayed.invalidate()

    @property
    def offered(self) -> bool:
        """Whether the gateway declares the extension: some upstream is set to serve skills (known from the
        config alone, so a session is told the same thing however its upstreams fare)."""
        return bool(self._sources)

    def upstream_of(self, uri: str | None) -> str | None:
        """The upstream a skill URI routes to (its first segment, when that is a skill upstream's)."""
        split = None if uri is None else split_skill_uri(uri)
        return split[0] if split is not None and split[0] in self._sources else None

    def _skills(self, namespace: str, viewer: Viewer | None) -> Iterator[LocalSkill]:
        source = self._sources.get(namespace)
        if source is None or not source.ready:
            return
        mount = self._mounts[namespace]
        for path in sorted(source.skills):
            skill = source.skills[path]
            if self._visible(mount, skill, viewer):
                yield skill

    def _visible(self, mount: Mount, skill: LocalSkill, viewer: Viewer | None) -> bool:
        """The rules that decide which prompts show decide which skills show, on the same names: the
        upstream's own policy on the skill's path, the global policy and the viewer's (a token's, a
        view's) on ``<namespace><sep><path>``, deny winning, tags from the front matter's ``tags`` and
        the upstream's overrides. A skill they hide is answered as one that is not there."""
        tags = skill_tags(skill, mount)
        public = mount.natural_name(skill.path)
        return (
            mount.rules.allows(skill.path, tags)
            and self._policy.allows(public, tags)
            and (viewer is None or viewer.allows(public, tags))
        )

    def visible(self, mount: Mount, skill: LocalSkill, viewer: Viewer | None = None) -> bool:
        """Whether ``skill`` of ``mount`` is served to ``viewer`` (the command line's listing)."""
        return self._visible(mount, skill, viewer)

    async def every(self) -> dict[str, tuple[Mount, list[LocalSkill]] | None]:
        """Per upstream set to serve skills, its mount and every skill it has, before policy, or None when
        it is not ready: what ``check``, ``list`` and ``explain`` report (relayed ones asked for first)."""
        await self._refresh()
        return {
            namespace: (self._mounts[namespace], [source.skills[path] for path in sorted(source.skills)])
            if source.ready
            else None
            for namespace, source in self._sources.items()
        }

    async def explanations(
        self, layers: Sequence[Layer], name: str | None = None
    ) -> tuple[list[Explanation], list[str]]:
        """Every skill (or those ``name`` names: its policy name, its SKILL.md's URI, its folder's or one
        of its files': a file is read by whoever sees its skill) explained for a caller whose requests go
        through the global policy and then ``layers``, as ``_visible`` decides; and the skill upstreams
        that are not ready."""
        everyone = [Layer("the global [policy]", self._policy), *layers]
        found: list[Explanation] = []
        unavailable: list[str] = []
        for namespace, held in (await self.every()).items():
            if held is None:
                unavailable.append(namespace)
                continue
            mount, skills = held
            for skill in skills:
                uri = skill_uri(namespace, skill.path, SKILL_FILE)
                folder = skill_uri(namespace, skill.path, "")
                if name is None or name in (mount.natural_name(skill.path), folder[:-1]) or name.startswith(folder):
                    found.append(explain_skill(mount, skill.path, uri, skill_tags(skill, mount), everyone))
        return found, unavailable

    def declares(self, namespace: str) -> bool | None:
        """Whether a relayed upstream declares the extension (None: its skills are not relayed ones)."""
        relayed = self._relayed.get(namespace)
        return None if relayed is None else relayed.declares

    def _cache(self, viewer: Viewer | None) -> dict[str, Any]:
        return {"ttlMs": self.ttl_ms, "cacheScope": "public" if viewer is None else "private"}

    # ---- skills/list and skills/get ------------------------------------------------------------

    async def list_skills(self, params: dict[str, Any] | None, *, viewer: Viewer | None) -> dict[str, Any]:
        parsed = parse_params(ListSkillsParams, params)
        await self._refresh()
        namespaces = list(self._sources)
        position = (
            ListingPosition(self._generation, tuple(START for _ in namespaces))
            if parsed.cursor is None
            else self._codec.decode(parsed.cursor, generation=self._generation, upstream_count=len(namespaces))
        )
        entries: list[dict[str, Any]] = []
        upstreams: list[PagePosition | None] = list(position.upstreams)
        for i, namespace in enumerate(namespaces):
            at = upstreams[i]
            if at is None:
                continue
            skills = list(self._skills(namespace, viewer))
            room = self._page_size - len(entries)
            taken = skills[at.offset : at.offset + room]
            entries.extend(entry(namespace, skill) for skill in taken)
            done = at.offset + len(taken) >= len(skills)
            upstreams[i] = None if done else PagePosition(None, at.offset + len(taken))
            if not done:
                break
        result: dict[str, Any] = {"skills": entries, **self._cache(viewer)}
        following = ListingPosition(self._generation, tuple(upstreams))
        if not following.finished:
            result["nextCursor"] = self._codec.encode(following)
        return result

    async def get_skill(self, params: dict[str, Any] | None, *, viewer: Viewer | None) -> dict[str, Any]:
        uri = parse_params(GetSkillParams, params).uri
        await self._refresh(self.upstream_of(uri))
        found = self._skill_at(uri, viewer)
        if found is None or uri != skill_uri(found[0], found[1].path, SKILL_FILE):
            raise InvalidParams(f"No skill is served at {shown(uri)}")
        return {"skill": entry(*found), **self._cache(viewer)}

    def _skill_at(self, uri: str, viewer: Viewer | None) -> tuple[str, LocalSkill] | None:
        """The innermost skill whose folder holds what ``uri`` names (its file or one of its folders)."""
        split = split_skill_uri(uri)
        if split is None:
            return None
        namespace, rest = split
        best: LocalSkill | None = None
        for skill in self._skills(namespace, viewer):
            if (rest == skill.path or rest.startswith(skill.path + "/")) and (
                best is None or len(skill.path) > len(best.path)
            ):
                best = skill
        return None if best is None else (namespace, best)

    # ---- resources -----------------------------------------------------------------------------

    async def read_resource(self, params: dict[str, Any] | None, *, viewer: Viewer | None) -> dict[str, Any]:
        uri = parse_params(ReadResourceParams, params).uri
        namespace = self.upstream_of(uri)
        relayed = self._relayed.get(namespace) if namespace is not None else None
        held = relayed is not None and relayed.fresh  # a manifest from before this request
        if relayed is not None:
            await relayed.refresh()
        file = self._file_at(uri, viewer)
        if file is None:
            raise InvalidParams(f"Resource not found: {shown(uri)}")
        if file.relayed_from is not None and relayed is not None:
            read = await self._read_relayed(relayed, uri, file, viewer, held=held)
            return {"contents": [read], **self._cache(viewer)}
        return {"contents": [contents(uri, file)], **self._cache(viewer)}

    async def _read_relayed(
        self, relayed: RelayedSkills, uri: str, file: SkillFile, viewer: Viewer | None, *, held: bool
    ) -> dict[str, Any]:
        """A relayed file, checked against its manifest. Bytes that do not match a manifest held from
        before this request may be a change not yet heard of: the manifest is asked for once more, and
        the file read again if its entry changed; bytes matching neither are refused."""
        try:
            return await relayed.read(uri, file)
        except DigestMismatch:
            if not held:
                raise
            await relayed.refresh(force=True)
            again = self._file_at(uri, viewer)
            if again is None or again.relayed_from is None or (again.digest, again.size) == (file.digest, file.size):
                raise
            return await relayed.read(uri, again)

    def _file_at(self, uri: str, viewer: Viewer | None) -> SkillFile | None:
        found = self._skill_at(uri, viewer)
        if found is None:
            return None
        path = file_path_of(uri[len(skill_uri(found[0], found[1].path, "")) :])
        return None if path is None else found[1].files.get(path)

    async def list_resources(self, params: dict[str, Any] | None, *, viewer: Viewer | None) -> dict[str, Any]:
        """Every file of every skill (a nested skill's once, as its own): what a client that does not know
        the extension sees of skills, ordinary resources, as the spec says it should."""
        cursor = parse_params(ListSkillsParams, params).cursor
        await self._refresh()
        every = [
            listed(skill_uri(namespace, skill.path, path), skill, file)
            for namespace in self._sources
            for skill in self._skills(namespace, viewer)
            for path, file in skill.files.items()
            if not _in_nested(skill, path, self._sources[namespace].skills)
        ]
        return self._page_of(every, cursor, "resources", viewer, bound_to="resources")

    async def list_templates(self, params: dict[str, Any] | None, *, viewer: Viewer | None) -> dict[str, Any]:
        """None: every skill file is a resource of its own (the resources capability implies the method)."""
        cursor = parse_params(ListSkillsParams, params).cursor
        return self._page_of([], cursor, "resourceTemplates", viewer, bound_to="templates")

    async def read_directory(self, params: dict[str, Any] | None, *, viewer: Viewer | None) -> dict[str, Any]:
        parsed = parse_params(ReadDirectoryParams, params)
        await self._refresh(self.upstream_of(parsed.uri))
        children = self._children(parsed.uri, viewer)
        if children is None:
            raise InvalidParams(f"{shown(parsed.uri)} is not a directory resource")
        return self._page_of(children, parsed.cursor, "resources", viewer, bound_to="directory " + parsed.uri)

    def _children(self, uri: str, viewer: Viewer | None) -> list[dict[str, Any]] | None:
        """The direct children of a directory of some skill namespace, or None when ``uri`` is none."""
        split = split_skill_uri(uri)
        if split is None:
            return None
        namespace, rest = split
        files: dict[str, dict[str, Any]] = {}
        folders: set[str] = set()
        for skill in self._skills(namespace, viewer):
            if rest == skill.path or rest.startswith(skill.path + "/"):
                inner = file_path_of(rest[len(skill.path) + 1 :])
                if inner is None or inner not in skill.directories:
                    continue
                for path, file in skill.files.items():
                    relative = path[len(inner) + 1 :] if inner else path
                    if inner and not path.startswith(inner + "/"):
                        continue
                    if "/" in relative:
                        folders.add(relative.split("/", 1)[0])
                    else:
                        files[relative] = listed(f"{uri}/{file_uri_path(relative)}", skill, file)
            elif not rest or skill.path.startswith(rest + "/"):
                folders.add(skill.path[len(rest) + 1 if rest else 0 :].split("/", 1)[0])
        if not files and not folders:
            return None if not (namespace in self._sources and not rest) else []
        children = [
            {"uri": f"{uri}/{file_uri_path(name)}", "name": name, "mimeType": DIRECTORY_MIME_TYPE} for name in folders
        ]
        return sorted([*files.values(), *children], key=lambda child: str(child["name"]))

    def _page_of(
        self, items: list[dict[str, Any]], cursor: Any, key: str, viewer: Viewer | None, *, bound_to: str
    ) -> dict[str, Any]:
        generation = f"{self._generation}|{bound_to}"
        offset = 0
        if cursor is not None:
            at = self._codec.decode(cursor, generation=generation, upstream_count=1).upstreams[0]
            offset = 0 if at is None else at.offset
        page = items[offset : offset + self._page_size]
        result: dict[str, Any] = {key: page, **self._cache(viewer)}
        if offset + len(page) < len(items):
            result["nextCursor"] = self._codec.encode(
                ListingPosition(generation, (PagePosition(None, offset + len(page)),))
            )
        return result


def _relays(mount: Mount) -> bool:
    """Whether the mount is an MCP upstream set to have its skills relayed (``relay_skills``)."""
    return bool(getattr(getattr(mount.source, "settings", None), "relay_skills", False))


def skill_tags(skill: LocalSkill, mount: Mount) -> tuple[str, ...]:
    """A skill's tags: its front matter's ``tags`` (a list of text, as prompt files give theirs) and
    those its upstream's override of the same name adds."""
    written = skill.frontmatter.get("tags")
    own = tuple(t for t in written if isinstance(t, str)) if isinstance(written, list) else ()
    override = mount.overrides.get(skill.path)
    return tuple(dict.fromkeys(own + (override.tags if override is not None else ())))


def skill_uri(namespace: str, skill_path: str, file: str) -> str:
    """The URI of a skill's file (its path in the skill's folder; "" for the folder): the skill path is
    plain segments already (its folders must be), the file's path is escaped where a URI needs it."""
    return f"{SCHEME}{namespace}/{skill_path}/{file_uri_path(file)}"


def entry(namespace: str, skill: LocalSkill) -> dict[str, Any]:
    """A skill's entry as ``skills/list`` and ``skills/get`` give it."""
    return {
        "uri": skill_uri(namespace, skill.path, SKILL_FILE),
        "frontmatter": skill.frontmatter,
        "resources": [
            {"uri": skill_uri(namespace, skill.path, path), "digest": file.digest, "size": file.size}
            for path, file in skill.files.items()
        ],
    }


def listed(uri: str, skill: LocalSkill, file: SkillFile) -> dict[str, Any]:
    """A file as ``resources/list`` and ``resources/directory/read`` show it: a SKILL.md named and
    described by its front matter, as the spec asks, any other file by its file name."""
    if file.path == SKILL_FILE:
        return {
            "uri": uri,
            "name": skill.name,
            "description": skill.description,
            "mimeType": file.mime_type,
            "size": file.size,
        }
    return {"uri": uri, "name": file.path.rsplit("/", 1)[-1], "mimeType": file.mime_type, "size": file.size}


def contents(uri: str, file: SkillFile) -> dict[str, Any]:
    """A file's bytes as ``resources/read`` gives them: text when they are UTF-8, else base64."""
    try:
        return {"uri": uri, "mimeType": file.mime_type, "text": file.data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"uri": uri, "mimeType": file.mime_type, "blob": base64.b64encode(file.data).decode()}


def _in_nested(skill: LocalSkill, path: str, skills: Mapping[str, LocalSkill]) -> bool:
    """Whether a file of ``skill`` is a nested skill's (listed once, under the innermost skill)."""
    parts = path.split("/")[:-1]
    return any(f"{skill.path}/{'/'.join(parts[: i + 1])}" in skills for i in range(len(parts)))
