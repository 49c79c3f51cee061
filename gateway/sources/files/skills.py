"""Skill folders read as Agent Skills for the Skills extension (SEP-2640): each ``SKILL.md`` with every
file beside and below it, the front matter as the JSON object the spec defines, and a manifest of the
files (SHA-256 digest and size of the raw bytes).

Where skills are: ``.claude/skills/<name>/SKILL.md`` anywhere in the directory (the folders before
``.claude`` become the skill's prefix, so two projects' ``pdf`` skills are ``a/pdf`` and ``b/pdf``),
a Claude Code plugin's ``skills/<name>/SKILL.md``, and ``<name>/SKILL.md`` when the directory is a
``.claude/skills`` folder itself. A folder inside a skill that holds a ``SKILL.md`` is a nested skill:
a skill of its own, and files of the skill around it (the spec's "nested content is supporting
content").

A skill is served only as the spec allows, else it is left out with a problem saying why: front matter
that is YAML naming ``name`` and ``description``, the name following the Agent Skills rules and equal to
its folder's, at most 512 files and 16 MiB. The bytes are read once and kept, so what is served is what
the digest describes until the next read of the folder. Hidden files and folders are no part of a skill.
"""

from __future__ import annotations

import datetime
import mimetypes
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gateway.protocol.skills import (
    MAX_RESOURCES_PER_SKILL,
    MAX_TOTAL_SIZE_PER_SKILL,
    PLAIN_SEGMENT,
    SKILL_FILE,
    SKILL_MIME_TYPE,
    description_problem,
    digest_of,
    valid_name,
)
from gateway.sources.files.common import FRONT_MATTER, YAML_ERRORS
from gateway.sources.files.misread import SHOWN

MAX_SKILLS_BYTES = 256 * 1024 * 1024
"""Every skill of one directory together: they are held in memory, so what a folder can cost is bounded."""
MAX_SKILLS = 2000


@dataclass(frozen=True)
class SkillFile:
    path: str  # relative to the skill's folder, "/"-separated
    data: bytes = field(repr=False)
    digest: str
    mime_type: str
    relayed_from: str | None = None
    """For a relayed upstream's file (``catalog/relayed_skills.py``): its URI there. Its bytes are not
    held (``data`` is empty) but read from the upstream when asked for, and checked against ``digest``
    and ``declared_size``, the upstream's manifest."""
    declared_size: int | None = None

    @property
    def size(self) -> int:
        return len(self.data) if self.declared_size is None else self.declared_size


@dataclass(frozen=True)
class LocalSkill:
    """One skill folder as read: its path in the directory's skill namespace, front matter and files."""

    path: str  # e.g. "pdf-processing" or "team/pdf-processing"; the last segment is the name
    source: str  # where its SKILL.md is, relative to the directory (for problems and notes)
    frontmatter: dict[str, Any]
    files: dict[str, SkillFile]  # by path, SKILL.md included
    directories: frozenset[str]  # every folder of the skill by path, "" being its root

    @property
    def name(self) -> str:
        return str(self.frontmatter["name"])

    @property
    def description(self) -> str:
        return str(self.frontmatter["description"])


@dataclass
class ScannedSkills:
    skills: dict[str, LocalSkill] = field(default_factory=dict)  # by skill path
    problems: dict[str, str] = field(default_factory=dict)  # by the SKILL.md's relative path
    outside: list[str] = field(default_factory=list)  # the first SKILL.md files in no skills layout (said)
    outside_count: int = 0


class SkillFileError(Exception):
    """A skill that cannot be served, and why."""


class _VerbatimLoader(yaml.SafeLoader):
    """YAML as hosts read it: an entry's front matter is JSON and must say what the file says to the
    YAML 1.2 parsers hosts compare it with (js-yaml, `yaml`), where PyYAML reads YAML 1.1: ``yes`` stays
    the text it is (1.1: true), ``010`` is ten (1.1: eight), ``1:20`` text (1.1: eighty), ``0o17`` and
    ``1e3`` numbers. A date stays the text it is too (js-yaml's default schema makes it no date)."""


_YAML_1_1_ONLY = {f"tag:yaml.org,2002:{kind}" for kind in ("bool", "int", "float", "timestamp")}
_VerbatimLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _YAML_1_1_ONLY]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag, _pattern, _first in (  # the YAML 1.2 core schema's (yaml.org/spec/1.2.2, 10.3.2)
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+.0123456789",
    ),
):
    _VerbatimLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), list(_first))


def _core_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    return int(text[2:], 8) if text.startswith("0o") else int(text, 16) if text.startswith("0x") else int(text, 10)


def _core_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = str(loader.construct_scalar(node)).lower()
    return float(text.replace(".inf", "inf").replace(".nan", "nan"))


_VerbatimLoader.add_constructor("tag:yaml.org,2002:int", _core_int)
_VerbatimLoader.add_constructor("tag:yaml.org,2002:float", _core_float)


def scan_skills(root: Path, plugin: bool) -> ScannedSkills:
    """Every skill under ``root``; a skill that breaks the spec's rules is a problem, not an entry."""
    scanned = ScannedSkills()
    resolved_root = root.resolve()
    total = 0
    whole_folder = resolved_root.parts[-2:] == (".claude", "skills")
    skill_folders: list[str] = []  # walked top-down: a skill's folder comes before the folders inside it
    for relative, skill_path in _skill_files(root, plugin=plugin, whole_folder=whole_folder):
        folder = relative.rsplit("/", 1)[0]
        if skill_path is None:
            if not any(folder.startswith(outer) for outer in skill_folders):  # not a file of a skill's
                scanned.outside_count += 1
                if len(scanned.outside) < SHOWN:
                    scanned.outside.append(relative)
            continue
        skill_folders.append(folder + "/")
        if len(skill_folders) > MAX_SKILLS:
            scanned.problems[relative] = f"{relative}: more than {MAX_SKILLS} skills; the rest are not served"
            break
        problem: str | None = None
        if skill_path in scanned.skills:
            problem = f"the skill path {skill_path!r} is taken by {scanned.skills[skill_path].source}"
        else:
            try:
                skill = read_skill(root / relative.rsplit("/", 1)[0], skill_path, relative)
            except SkillFileError as exc:
                problem = str(exc)
            else:
                size = sum(len(f.data) for f in skill.files.values())
                if total + size > MAX_SKILLS_BYTES:
                    problem = f"the directory's skills would pass {MAX_SKILLS_BYTES} bytes"
        if problem is not None:
            scanned.problems[relative] = f"{relative}: not served as a skill: {problem}"
            continue
        total += size
        scanned.skills[skill_path] = skill
    return scanned


def _skill_files(root: Path, *, plugin: bool, whole_folder: bool) -> Iterator[tuple[str, str | None]]:
    """(relative path of a SKILL.md, its skill path: None where no skills layout holds it), in a stable
    order, symbolic links not followed."""
    for directory, subdirectories, files in os.walk(root, followlinks=False):
        relative_dir = Path(directory).relative_to(root).as_posix()
        parts = [] if relative_dir == "." else relative_dir.split("/")
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith(".") or d == ".claude")
        if parts[-1:] == [".claude"]:
            subdirectories[:] = [d for d in subdirectories if d == "skills"]
        if SKILL_FILE not in files or not parts:
            continue
        yield f"{relative_dir}/{SKILL_FILE}", _skill_path(parts, plugin=plugin, whole_folder=whole_folder)


def _skill_path(parts: list[str], *, plugin: bool, whole_folder: bool) -> str | None:
    """The skill path of a folder holding a SKILL.md (None: not a skill folder)."""
    if plugin:
        return parts[1] if len(parts) == 2 and parts[0] == "skills" else None
    if whole_folder:
        return "/".join(parts)
    for i in range(len(parts) - 2):
        if parts[i : i + 2] == [".claude", "skills"]:
            return "/".join(parts[:i] + parts[i + 2 :])
    return None


def read_skill(folder: Path, skill_path: str, source: str) -> LocalSkill:
    """One skill folder, or SkillFileError saying why it cannot be served as a skill."""
    bad = next((s for s in skill_path.split("/") if not PLAIN_SEGMENT.match(s)), None)
    if bad is not None:
        raise SkillFileError(f"folder {bad!r} is not a plain URI segment (letters, digits, '.', '_', '~', '-')")
    files = _read_files(folder)
    frontmatter = parse_frontmatter(files[SKILL_FILE].data)
    name = frontmatter["name"]
    if not valid_name(name):
        raise SkillFileError(
            f"the name {name!r} breaks the Agent Skills naming rules (1-64 lower-case letters, digits and hyphens)"
        )
    folder_name = skill_path.rsplit("/", 1)[-1]
    if name != folder_name:
        raise SkillFileError(f"the name {name!r} is not its folder's ({folder_name!r})")
    directories = frozenset({""} | _parents(files))
    return LocalSkill(skill_path, source, frontmatter, files, directories)


def _parents(files: dict[str, SkillFile]) -> set[str]:
    parents: set[str] = set()
    for path in files:
        parts = path.split("/")[:-1]
        parents.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return parents


def parse_frontmatter(data: bytes) -> dict[str, Any]:
    """The SKILL.md's front matter as the entry carries it: every field as written, ``name`` and
    ``description`` required (strings), nothing that JSON cannot say."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillFileError(f"{SKILL_FILE} is not UTF-8 text (byte {exc.start})") from exc
    match = FRONT_MATTER.match(text)
    if match is None:
        raise SkillFileError(f"{SKILL_FILE} does not begin with YAML front matter between '---' lines")
    try:
        meta = yaml.load(match.group(1), Loader=_VerbatimLoader)  # noqa: S506 - a SafeLoader subclass
    except YAML_ERRORS as exc:
        raise SkillFileError(f"its front matter is not valid YAML ({getattr(exc, 'problem', None) or exc})") from exc
    if not isinstance(meta, dict):
        raise SkillFileError("its front matter is not a mapping of keys to values")
    for key in ("name", "description"):
        value = meta.get(key)
        if value is not None and value != "" and not isinstance(value, str):  # YAML read `12345` as a number
            raise SkillFileError(
                f"its front matter's {key} is not text ({value!r}: the spec requires strings; quote it)"
            )
        if not value:
            raise SkillFileError(f"its front matter has no {key} (the spec requires name and description)")
    problem = description_problem(meta["description"])
    if problem is not None:
        raise SkillFileError(problem)
    problem = _not_json(meta)
    if problem is not None:
        raise SkillFileError(f"its front matter holds {problem}, which JSON cannot carry")
    return meta


def _not_json(value: Any) -> str | None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"the non-text key {key!r}"
            problem = _not_json(item)
            if problem is not None:
                return problem
        return None
    if isinstance(value, list):
        return next((p for p in map(_not_json, value) if p is not None), None)
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return f"the number {value!r}"
    if isinstance(value, (datetime.date, bytes, set)):
        return f"a {type(value).__name__}"
    return None


def _read_files(folder: Path) -> dict[str, SkillFile]:
    """Every file of the skill (hidden ones aside), confined to its folder, within the spec's limits."""
    resolved = folder.resolve()
    files: dict[str, SkillFile] = {}
    total = 0
    for directory, subdirectories, names in os.walk(folder, followlinks=False):
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith("."))
        relative_dir = Path(directory).relative_to(folder).as_posix()
        for file_name in sorted(n for n in names if not n.startswith(".")):
            relative = file_name if relative_dir == "." else f"{relative_dir}/{file_name}"
            path = (folder / relative).resolve()
            if not path.is_relative_to(resolved):
                raise SkillFileError(f"{relative} is a symbolic link to a file outside the skill's folder")
            if not path.is_file():
                continue
            if len(files) >= MAX_RESOURCES_PER_SKILL:
                raise SkillFileError(f"more than {MAX_RESOURCES_PER_SKILL} files (the spec's limit)")
            try:
                size = path.stat().st_size
                if total + size > MAX_TOTAL_SIZE_PER_SKILL:
                    raise SkillFileError(f"more than {MAX_TOTAL_SIZE_PER_SKILL} bytes (the spec's limit)")
                data = path.read_bytes()
            except OSError as exc:
                raise SkillFileError(f"{relative} cannot be read: {exc.strerror}") from exc
            total += len(data)
            files[relative] = SkillFile(relative, data, digest_of(data), mime_type_of(relative, data))
    if SKILL_FILE not in files:
        raise SkillFileError(f"{SKILL_FILE} is not a regular file")
    return files


def mime_type_of(path: str, data: bytes) -> str:
    if path.endswith(".md"):
        return SKILL_MIME_TYPE
    guessed, _ = mimetypes.guess_type(path, strict=False)
    if guessed is not None:
        return guessed
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain"
