"""The Skills extension (SEP-2640, ``io.modelcontextprotocol/skills``), sans I/O.

Field and method names are the specification's own (``ext-skills``, ``specification/stable/skills.mdx``):
a server that declares the extension under ``capabilities.extensions`` (with ``directoryRead`` when it
answers ``resources/directory/read``) must also declare ``resources`` and answer ``skills/list`` and
``skills/get``; a skill's files are ordinary resources read with ``resources/read``. An entry is
``{uri, frontmatter, resources}``: ``uri`` the ``SKILL.md``'s, ``frontmatter`` the file's YAML front
matter verbatim as a JSON object, ``resources`` every file as ``{uri, digest, size}`` (``digest`` is
``sha256:`` and 64 lower-case hex digits over the raw bytes) or the string ``"dynamic"``.

The models here check what clients send (params) and what upstreams answer (entries, so a relayed
entry is refused when it breaks the rules rather than passed on); like ``models.py`` they validate
and the original dict is what travels.
"""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any, Literal
from urllib.parse import quote, unquote

from pydantic import Field, field_validator, model_validator

from gateway.protocol.models import _Wire

EXTENSION_ID = "io.modelcontextprotocol/skills"
LIST_METHOD = "skills/list"
GET_METHOD = "skills/get"
DIRECTORY_READ_METHOD = "resources/directory/read"
SKILL_FILE = "SKILL.md"
SKILL_MIME_TYPE = "text/markdown"
DIRECTORY_MIME_TYPE = "inode/directory"
SCHEME = "skill://"
DYNAMIC = "dynamic"
MAX_RESOURCES_PER_SKILL = 512
MAX_TOTAL_SIZE_PER_SKILL = 16 * 1024 * 1024
META_PREFIX = "io.modelcontextprotocol.skills/"
"""Reserved for the extension's own ``_meta`` keys on skill resources; the gateway adds none."""

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
NAME_PATTERN = re.compile(r"^(?!-)(?!.*--)[a-z0-9-]{1,64}(?<!-)\Z")
"""The Agent Skills naming rules: 1-64 characters, lower-case letters, digits and single inner hyphens."""

MAX_URI_CHARS = 4096
MAX_DESCRIPTION_CHARS = 1024
"""The Agent Skills limit on ``description``, in characters (code points), which the Inspector checks too."""


def digest_of(data: bytes) -> str:
    """The digest the extension defines for a file's raw bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def extension_capability(*, directory_read: bool) -> dict[str, Any]:
    """The server's ``capabilities.extensions`` entry (an empty object: no optional feature)."""
    return {EXTENSION_ID: {"directoryRead": True} if directory_read else {}}


def declares_extension(capabilities: Any) -> bool:
    """Whether a peer's capabilities declare the extension (an upstream's, to relay its skills)."""
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION_ID), dict)


def valid_name(name: str) -> bool:
    return NAME_PATTERN.match(name) is not None


def description_problem(description: str) -> str | None:
    """Why a ``description`` breaks the Agent Skills rules (blank, or over 1024 characters), or None."""
    if not description.strip():
        return "its description is blank (the spec requires one)"
    if len(description) > MAX_DESCRIPTION_CHARS:
        return f"its description is {len(description)} characters, above the spec's limit of {MAX_DESCRIPTION_CHARS}"
    return None


# ---- what clients send ------------------------------------------------------------------------

Uri = Annotated[str, Field(min_length=1, max_length=MAX_URI_CHARS)]


class ListSkillsParams(_Wire):
    cursor: Any = None  # judged by the cursor codec, as every listing's is


class GetSkillParams(_Wire):
    uri: Uri


class ReadResourceParams(_Wire):
    uri: Uri


class ReadDirectoryParams(_Wire):
    uri: Uri
    cursor: Any = None


# ---- what upstreams answer (and the gateway's own entries, checked in tests) ------------------


MAX_EXACT_JSON_INTEGER = 2**53 - 1
"""The largest integer every JSON reader holds exactly (I-JSON, RFC 7493): a size past it is malformed."""


class SkillResource(_Wire):
    uri: Uri
    digest: Annotated[str, Field(pattern=DIGEST_PATTERN)]
    size: Annotated[int, Field(ge=0, le=MAX_EXACT_JSON_INTEGER)]


class Frontmatter(_Wire):
    name: str
    description: str

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not valid_name(value):
            raise ValueError(f"the name {value!r} breaks the spec's rules (1-64 of a-z, 0-9 and single inner hyphens)")
        return value

    @field_validator("description")
    @classmethod
    def _described(cls, value: str) -> str:
        problem = description_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class Skill(_Wire):
    uri: Uri
    frontmatter: Frontmatter
    resources: list[SkillResource] | Literal["dynamic"]

    @field_validator("resources")
    @classmethod
    def _bounded(cls, value: list[SkillResource] | str) -> list[SkillResource] | str:
        if isinstance(value, list) and len(value) > MAX_RESOURCES_PER_SKILL:
            raise ValueError(f"more than {MAX_RESOURCES_PER_SKILL} resources")
        if isinstance(value, list) and sum(r.size for r in value) > MAX_TOTAL_SIZE_PER_SKILL:
            raise ValueError(f"its files come to more than {MAX_TOTAL_SIZE_PER_SKILL} bytes")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Skill:
        """What the spec asks of every entry: ``uri`` names a ``SKILL.md`` whose folder is the skill's
        name, and an array of resources lists that ``SKILL.md`` and only files under its folder."""
        root = skill_root(self.uri)
        if root is None:
            raise ValueError(f"uri {self.uri!r} does not name a {SKILL_FILE}")
        if root.rsplit("/", 1)[-1] != self.frontmatter.name:
            raise ValueError(f"the uri's last folder is not the frontmatter name {self.frontmatter.name!r}")
        if isinstance(self.resources, list):
            uris = [r.uri for r in self.resources]
            if self.uri not in uris:
                raise ValueError(f"resources do not list {self.uri}")
            if len(set(uris)) != len(uris):
                raise ValueError("resources list a file twice")
            outside = next((u for u in uris if not _inside(u, root)), None)
            if outside is not None:
                raise ValueError(f"resource {outside!r} is not in the skill's folder")
        return self


def _inside(uri: str, root: str) -> bool:
    """Whether ``uri`` names a file under the folder ``root``, spelt one way: no empty, ``.`` or ``..``
    segment, escaped or not (``skill://a/../b/SKILL.md`` is another skill's file to a host that
    normalises it, and ``%2F`` a folder to one that decodes it)."""
    if not uri.startswith(root + "/"):
        return False
    return all(
        unquote(part) not in ("", ".", "..") and "/" not in unquote(part) for part in uri[len(root) + 1 :].split("/")
    )


class ListSkillsResult(_Wire):
    skills: list[Any]  # each checked on its own: one bad entry is dropped, not the page
    nextCursor: str | None = None
    ttlMs: int | float | None = None
    cacheScope: Literal["public", "private"] | None = None


class GetSkillResult(_Wire):
    skill: Skill
    ttlMs: int | float | None = None
    cacheScope: Literal["public", "private"] | None = None


# ---- URIs -------------------------------------------------------------------------------------


def skill_root(uri: str) -> str | None:
    """The skill's root directory URI for the URI of its ``SKILL.md`` (``skill://a/b/SKILL.md`` →
    ``skill://a/b``), or None when the URI does not name one under some skill path."""
    scheme_end = uri.find("://")
    if scheme_end <= 0 or not uri.endswith("/" + SKILL_FILE):
        return None
    root = uri[: -len(SKILL_FILE) - 1]
    path = root[scheme_end + 3 :]
    if not path or any(part in ("", ".", "..") for part in path.split("/")):
        return None
    return root


def split_skill_uri(uri: str) -> tuple[str, str] | None:
    """``skill://<first>/<rest>`` as (first segment, rest), or None: the gateway's own skill URIs carry
    the upstream's namespace as their first segment, so this says which upstream a URI belongs to.
    Empty, ``.`` and ``..`` segments are refused: a URI names one file, spelt one way."""
    if not uri.startswith(SCHEME):
        return None
    parts = uri[len(SCHEME) :].split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None
    return parts[0], "/".join(parts[1:])


_PATH_CHARACTERS = "/!$&'()*+,;=:@~"
"""What a URI path may hold unescaped besides letters, digits and ``-._`` (RFC 3986 ``pchar`` and ``/``)."""


def file_uri_path(path: str) -> str:
    """A skill file's path as it goes into a URI: a ``#``, ``?``, ``%``, space or non-ASCII letter
    escaped, so that a client parsing the URI reads the file's name (``a#b.txt`` → ``a%23b.txt``). A
    name that is not UTF-8 on disk (read as surrogate escapes) keeps its bytes (``caf%E9.txt``)."""
    return quote(path.encode("utf-8", "surrogateescape"), safe=_PATH_CHARACTERS)


def file_path_of(uri_path: str) -> str | None:
    """The file path a URI's path names, or None when it is not spelt as ``file_uri_path`` spells it (one
    spelling for each file, as for every skill URI)."""
    path = unquote(uri_path, errors="surrogateescape")
    return path if file_uri_path(path) == uri_path else None


PLAIN_SEGMENT = re.compile(r"^[A-Za-z0-9._~-]+\Z")
"""An RFC 3986 unreserved path segment: what each folder of a skill path must be (it needs no escaping)."""


def plain_skill_path(path: str) -> bool:
    """Whether every folder of a skill path is a plain segment, and none is ``.`` or ``..``."""
    return all(PLAIN_SEGMENT.match(part) and part not in (".", "..") for part in path.split("/"))
