"""An upstream made of files: a directory of prompt files (``prompts.py`` reads each), served in the
process and watched, so an edit reaches connected clients as ``list_changed``.

It stands where an upstream connector stands (the catalog, ``check``, ``/readyz`` and the metrics see
the same attributes), without a process or a connection. Files are confined to the directory: a path
that leaves it (``..`` in a name, a symbolic link pointing out) is refused, and so is a file that is
not valid UTF-8 or too large. A broken file is reported (``check`` names it, with its line) and the
others keep serving.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import structlog

from gateway.config import FilesUpstream
from gateway.observability.tracing import tracing
from gateway.protocol.errors import UpstreamRejected, UpstreamUnavailable
from gateway.protocol.lists import EVERY_LIST, NO_LIST, PROMPTS, SKILLS, OnChange
from gateway.sources.files.common import valid_name
from gateway.sources.files.kinds import Format, format_of, kind_of
from gateway.sources.files.misread import commands_note, outside_note
from gateway.sources.files.prompts import (
    MAX_ATTACHMENT_BYTES,
    MAX_FILE_BYTES,
    Attachment,
    FilePrompt,
    NotOffered,
    PromptFileError,
    RenderError,
    parse_prompt_file,
)
from gateway.sources.files.skills import LocalSkill, scan_skills
from gateway.sources.files.watch import FolderWatch, Reason

log = structlog.get_logger("gateway.files")

MAX_FILES = 2000
MAX_ATTACHED_BYTES = 64 * 1024 * 1024
"""All the files a directory's prompts embed, together (each is read once, however many prompts embed it)."""
RENDER_TIMEOUT_S = 2.0
"""A template that has not rendered by then fails its request. Python cannot stop a thread, so the
render finishes in the background (the sandbox bounds ``range`` and output, which bounds most loops);
the thread is a daemon, so it never holds the gateway's exit."""


async def _render_off_the_loop(prompt: FilePrompt, values: dict[str, str]) -> list[dict[str, Any]]:
    """``prompt.render`` on a daemon thread of its own, awaited for ``RENDER_TIMEOUT_S`` at most: a slow
    template fails its own request and stalls nobody else."""
    done = anyio.Event()
    outcome: dict[str, Any] = {}
    token = anyio.lowlevel.current_token()

    def work() -> None:
        try:
            outcome["messages"] = prompt.render(values)
        except Exception as exc:
            outcome["error"] = exc
        with contextlib.suppress(RuntimeError):  # the gateway may have stopped meanwhile
            anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=work, name=f"render {prompt.name}", daemon=True).start()
    with anyio.fail_after(RENDER_TIMEOUT_S):
        await done.wait()
    if "error" in outcome:
        raise outcome["error"]
    messages: list[dict[str, Any]] = outcome["messages"]
    return messages


INVALID_PARAMS = -32602


_TOOL_FOLDERS = {".claude": {"commands", "skills"}, ".github": {"prompts"}}
"""Hidden directories read anyway, and only these folders of them: where Claude Code and VS Code keep
their files in a repository."""


@dataclass
class Scanned:
    """A directory read: its prompts by name, the problems of the files that cannot be served (by path),
    and notes on files served otherwise than they ask (renamed, front matter read leniently)."""

    prompts: dict[str, FilePrompt] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def scan(root: Path, directory_format: Format = "auto", *, skill_files: bool = True) -> Scanned:
    """Every prompt file under ``root`` (hidden directories skipped, except where the tools keep theirs).
    Without ``skill_files`` (``skills_as = "skills"``), a skill's ``SKILL.md`` is not a prompt file: it
    neither takes a name from a command nor has notes said about it as a prompt."""
    scanned = Scanned()
    resolved_root = root.resolve()
    if directory_format == "auto":
        plugin = (root / ".claude-plugin").is_dir()
        directory_format = "claude-plugin" if plugin else format_of(resolved_root.as_posix())
    attached = _Attached(root, resolved_root)
    tool_files: list[FilePrompt] = []
    for relative in _prompt_files(root, directory_format, scanned, skill_files=skill_files):
        try:
            prompt = parse_prompt_file(
                relative, _read_confined(root / relative, resolved_root, relative), directory_format
            )
            if prompt.attachments:
                prompt = prompt.attach([attached.content(relative, a) for a in prompt.attachments])
        except PromptFileError as exc:
            scanned.problems[relative] = str(exc)
            continue
        except NotOffered as exc:
            scanned.notes.append(str(exc))
            continue
        if prompt.note:
            scanned.notes.append(prompt.note)
        if prompt.kind != "template":
            tool_files.append(prompt)
        elif prompt.name in scanned.prompts:
            taken = scanned.prompts[prompt.name].source
            scanned.problems[relative] = f"{relative}: the name {prompt.name!r} is taken by {taken}"
        else:
            scanned.prompts[prompt.name] = prompt
    commands = [p.source for p in scanned.prompts.values() if p.kind == "template" and "$ARGUMENTS" in p.body]
    if commands:  # a tester's clone of a commands collection: 50 templates, $ARGUMENTS served as written
        scanned.notes.append(commands_note(sorted(commands)))
    for prompt in sorted(tool_files, key=lambda p: (p.source.count("/"), p.source)):  # the shallowest keeps its name
        name = _free_name(prompt, scanned.prompts, directory_format)
        if name != prompt.name:
            taken_by = scanned.prompts[prompt.name].source
            scanned.notes.append(f"{prompt.source}: {prompt.name!r} is taken by {taken_by}: served as {name!r}")
            prompt = dataclasses.replace(prompt, name=name)
        scanned.prompts[name] = prompt
    return scanned


def _prompt_files(root: Path, directory_format: Format, scanned: Scanned, *, skill_files: bool) -> Iterator[str]:
    """The relative paths of the prompt files, in order, at most ``MAX_FILES`` (a problem says so)."""
    count = 0
    for directory, subdirectories, files in os.walk(root, followlinks=False):
        relative_dir = Path(directory).relative_to(root).as_posix()
        parent = relative_dir.rsplit("/", 1)[-1]
        if parent in _TOOL_FOLDERS:  # only the tool's own folders of it hold prompts
            subdirectories[:] = sorted(d for d in subdirectories if d in _TOOL_FOLDERS[parent])
            continue
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith(".") or d in _TOOL_FOLDERS)
        for file_name in sorted(files):
            relative = file_name if relative_dir == "." else f"{relative_dir}/{file_name}"
            if kind_of(relative, directory_format) is None or (not skill_files and relative.endswith("/SKILL.md")):
                continue
            count += 1
            if count > MAX_FILES:
                scanned.problems[relative] = f"{relative}: more than {MAX_FILES} prompt files; the rest are not read"
                return
            yield relative


def _free_name(prompt: FilePrompt, taken: Mapping[str, FilePrompt], directory_format: Format) -> str:
    """The prompt's name, or where it is taken, the name qualified by its folders (``frontend-component``
    for ``.claude/commands/frontend/component.md``), then numbered."""
    if prompt.name not in taken:
        return prompt.name
    folders = _namespace(prompt.source, directory_format)
    base = valid_name("-".join([*folders, prompt.name])) if folders else prompt.name
    candidate, number = base, 1
    while candidate in taken:
        number += 1
        candidate = f"{base}-{number}"
    return candidate


def _namespace(source: str, directory_format: Format) -> list[str]:
    """The folders that qualify a file's name: those of its path, less where the tools keep their files
    (``.claude/commands``, ``.claude/skills``, ``.github/prompts``, a plugin's own ``commands`` and
    ``skills``) and a skill's own folder, which is its name already. A folder that only happens to be
    called ``skills`` (inside a directory of commands) is a namespace like any other."""
    parts = source.split("/")[:-1]
    if directory_format == "claude-plugin" and parts[:1] in (["commands"], ["skills"]):
        parts = parts[1:]
    folders: list[str] = []
    index = 0
    while index < len(parts):
        tool_folders = _TOOL_FOLDERS.get(parts[index], set())
        if index + 1 < len(parts) and parts[index + 1] in tool_folders:
            index += 2
            continue
        folders.append(parts[index])
        index += 1
    return folders[:-1] if source.endswith("/SKILL.md") else folders


class _Attached:
    """The files a directory's prompts embed: each read once, confined like the prompt files themselves,
    all of them together bounded by ``MAX_ATTACHED_BYTES``."""

    def __init__(self, root: Path, resolved_root: Path) -> None:
        self._root, self._resolved_root = root, resolved_root
        self._read: dict[Path, bytes] = {}
        self._total = 0

    def content(self, relative: str, attachment: Attachment) -> dict[str, Any]:
        """An attachment's content block, read now (so ``check`` names a missing one)."""
        return attachment.content(self._bytes(relative, attachment), relative)

    def _bytes(self, relative: str, attachment: Attachment) -> bytes:
        where = f"{relative}:{attachment.line}"
        resolved = (self._root / attachment.path).resolve()
        if resolved in self._read:
            return self._read[resolved]
        if not resolved.is_relative_to(self._resolved_root):
            raise PromptFileError(f"{where}: {attachment.path} points outside the prompt directory (a symbolic link?)")
        try:
            if not resolved.is_file():
                raise PromptFileError(f"{where}: {attachment.path} is not a file in the prompt directory")
            size = resolved.stat().st_size
            if size > MAX_ATTACHMENT_BYTES:
                raise PromptFileError(f"{where}: {attachment.path} is over {MAX_ATTACHMENT_BYTES} bytes")
            if self._total + size > MAX_ATTACHED_BYTES:
                raise PromptFileError(f"{where}: the directory's attachments would pass {MAX_ATTACHED_BYTES} bytes")
            data = resolved.read_bytes()
        except OSError as exc:
            raise PromptFileError(f"{where}: {attachment.path} cannot be read: {exc.strerror}") from exc
        self._total += len(data)
        self._read[resolved] = data
        return data


def _read_confined(path: Path, root: Path, relative: str) -> str:
    resolved = path.resolve()
    if not resolved.is_relative_to(root):
        raise PromptFileError(f"{relative}: points outside the prompt directory (a symbolic link?)")
    if resolved.stat().st_size > MAX_FILE_BYTES:
        raise PromptFileError(f"{relative}: over {MAX_FILE_BYTES} bytes")
    try:
        return resolved.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PromptFileError(f"{relative}: not UTF-8 text (byte {exc.start})") from exc
    except OSError as exc:
        raise PromptFileError(f"{relative}: cannot be read: {exc.strerror}") from exc


class FilePromptSource:
    """The prompts of one directory, as an upstream."""

    announces_list_changes = True
    completes = True
    own_tags = True  # the tags in the files are the operator's own, so policy may go by them
    protocol_version = None
    restarts = 0

    def __init__(self, settings: FilesUpstream, *, on_change: OnChange) -> None:
        self.settings = settings
        self.namespace = settings.namespace
        self._root = Path(settings.path)
        self._on_change = on_change
        self.prompts: dict[str, FilePrompt] = {}
        self.skills: dict[str, LocalSkill] = {}
        self.offers_skills = settings.skills_as != "prompts"
        self.problems: dict[str, str] = {}
        self.skill_problems: dict[str, str] = {}
        """Under ``skills_as = "both"``: skills refused as skills whose files still serve as prompts (not
        broken files: ``check`` says so). Under ``"skills"`` a refused skill serves nothing: a problem."""
        self.notes: list[str] = []
        self.state = "starting"
        self.last_error: str | None = None
        self._settled = anyio.Event()
        self.server_info = {"name": f"files in {settings.path}"}

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    async def wait_settled(self) -> None:
        await self._settled.wait()

    def _load(self) -> None:
        """Read the folder. A broken file or a note is logged when it appears, not at every read: each
        edit, and the read that arms the watch, re-reads everything, and logged each again."""
        known = {*self.problems.values(), *self.skill_problems.values(), *self.notes}
        if not self._root.is_dir():  # watched, it comes back by itself when a folder is there again
            self.prompts, self.skills, self.problems, self.notes = {}, {}, {}, []
            self.skill_problems = {}
            self.state = "backing-off" if self.settings.watch else "failed"
            self.last_error = f"{self._root} is not a directory"
            return
        scanned = scan(self._root, self.settings.format, skill_files=self.settings.skills_as != "skills")
        prompts, problems = scanned.prompts, scanned.problems
        skills: dict[str, LocalSkill] = {}
        skill_problems: dict[str, str] = {}
        if self.offers_skills:
            plugin = self.settings.format == "claude-plugin" or (
                self.settings.format == "auto" and (self._root / ".claude-plugin").is_dir()
            )
            found = scan_skills(self._root, plugin)
            skills = found.skills
            if found.outside_count:
                scanned.notes.append(outside_note(found.outside, found.outside_count, self.settings.skills_as))
            if self.settings.skills_as == "skills":  # the scan left SKILL.md files out: they are no prompts
                problems = {**problems, **found.problems}
            else:  # "both": the file is still a prompt (or a prompt problem of its own, kept beside)
                skill_problems = found.problems
                served = {skill.source for skill in skills.values()}
                problems = {  # a tester read "broken" of a skill that was served (as a skill)
                    where: f"{problem} (not served as a prompt; served as a skill)" if where in served else problem
                    for where, problem in problems.items()
                }
        self.prompts, self.skills, self.problems, self.notes = prompts, skills, problems, scanned.notes
        self.skill_problems = skill_problems
        self.state = "ready"
        self.last_error = "; ".join([*self.problems.values(), *self.skill_problems.values()]) or None
        for problem in self.problems.values():
            if problem not in known:
                log.warning("prompt_file_broken", upstream=self.namespace, problem=problem)
        for problem in self.skill_problems.values():
            if problem not in known:
                log.warning("skill_refused", upstream=self.namespace, problem=problem)
        for note in self.notes:
            if note not in known:
                log.info("prompt_file_note", upstream=self.namespace, note=note)

    async def run(self) -> None:
        """Load, then reload on every change until cancelled (watching only where ``watch`` is on),
        following the folder when it is replaced, removed or made again (``watch.py``)."""
        if self.settings.unresolved is not None:  # a ${VAR} in its path is unset: nothing to read
            self.state, self.last_error = "failed", f"not started: {self.settings.unresolved}"
            self._settled.set()
            log.warning("upstream_state", upstream=self.namespace, state=self.state, error=self.last_error)
            await anyio.sleep_forever()
        await anyio.to_thread.run_sync(self._load)
        self._settled.set()
        self._log_state()
        if not self.ready and self.settings.watch:  # missing at start: followed until it is there
            log.warning("prompt_folder_missing", upstream=self.namespace, path=str(self._root), detail=self.last_error)
        if not self.settings.watch:
            await anyio.sleep_forever()
        await FolderWatch(self._root, self._reread).follow()

    def _log_state(self) -> None:
        if self.ready:
            log.info("upstream_state", upstream=self.namespace, state=self.state, prompts=len(self.prompts))
        else:
            log.warning("upstream_state", upstream=self.namespace, state=self.state, error=self.last_error)

    async def _reread(self, reason: Reason) -> None:
        before = (self.prompts, self.problems, self.skills, self.skill_problems)
        state = self.state
        await anyio.to_thread.run_sync(self._load)
        lists = (PROMPTS if self.prompts != before[0] else NO_LIST) | (SKILLS if self.skills != before[2] else NO_LIST)
        if self.state != state:  # (a folder gone or back: what check, /readyz and the metrics say changes)
            self._log_state()
            lists = EVERY_LIST
        if reason == "armed":  # the first watch is on: what changed since the first read, if anything
            if (self.prompts, self.problems, self.skills, self.skill_problems) != before:
                log.info("prompt_files_changed", upstream=self.namespace, prompts=len(self.prompts))
                self._on_change(self.namespace, lists)
            return
        if reason == "changed":
            log.info("prompt_files_changed", upstream=self.namespace, prompts=len(self.prompts))
        elif reason == "missing":
            log.warning("prompt_folder_missing", upstream=self.namespace, path=str(self._root), detail=self.last_error)
        else:
            event = "prompt_folder_replaced" if reason == "replaced" else "prompt_folder_back"
            log.info(event, upstream=self.namespace, path=str(self._root), prompts=len(self.prompts))
        self._on_change(self.namespace, lists)  # (none: a file no list shows, such as an attachment, changed)

    def unavailable(self) -> UpstreamUnavailable:
        return UpstreamUnavailable(self.namespace, f"is not ready ({self.last_error or self.state})")

    async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        if not self.ready:
            raise self.unavailable()
        params = params or {}
        if method == "prompts/list":
            return {"prompts": [self.prompts[name].listed() for name in sorted(self.prompts)]}
        if method == "prompts/get":
            prompt = self._prompt(params.get("name"))
            arguments = params.get("arguments") or {}
            values = {str(k): str(v) for k, v in arguments.items()}
            try:
                with tracing().step("render prompt file", **{"gen_ai.prompt.name": prompt.name}):
                    messages = await _render_off_the_loop(prompt, values)
            except TimeoutError:
                message = f"Invalid params: the template took longer than {RENDER_TIMEOUT_S:.0f} s to render"
                raise UpstreamRejected(
                    self.namespace, {"code": INVALID_PARAMS, "message": message}, reason=message
                ) from None
            except RenderError as exc:
                raise UpstreamRejected(
                    self.namespace,
                    {"code": INVALID_PARAMS, "message": f"Invalid params: {exc}"},
                    reason=f"Invalid params: {exc.reason}",
                ) from exc
            result: dict[str, Any] = {"messages": messages}
            if prompt.description:
                result["description"] = prompt.description
            return result
        if method == "completion/complete":
            ref = params.get("ref") or {}
            prompt = self._prompt(ref.get("name") if isinstance(ref, dict) else None)
            argument = params.get("argument") or {}
            offered = prompt.complete(str(argument.get("name", "")), str(argument.get("value", "")))
            return {"completion": {"values": offered, "total": len(offered), "hasMore": False}}
        raise UpstreamRejected(self.namespace, {"code": -32601, "message": f"Method not found: {method}"})

    def _prompt(self, name: Any) -> FilePrompt:
        prompt = self.prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            message = f"Unknown prompt: {name}"
            raise UpstreamRejected(self.namespace, {"code": INVALID_PARAMS, "message": message}, reason=message)
        return prompt
