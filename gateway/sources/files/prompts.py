"""Prompts kept in files: one file's text in, one prompt (or an error naming the line) out. Sans-IO:
reading the directory and watching it is ``source.py``'s job.

Three kinds of file, told apart by name and place:

- ``NAME.md``: YAML front matter (``name``, ``title``, ``description``, ``arguments`` with
  ``description`` / ``required`` / ``default`` / ``values``, ``tags``), then a Jinja2 template rendered
  in Jinja's *sandboxed* environment (compiled once; an undefined variable is an error, an optional
  argument left out renders as nothing; output bounded).
  A variable the template uses but the front matter does not declare is a required argument.
  A line ``<!-- assistant -->`` or ``<!-- user -->`` starts a message with that role; a line
  ``<!-- image: diagrams/flow.png -->`` or ``<!-- resource: notes/style.md -->`` is a message of its own
  holding that file, by a path relative to the prompt file and confined to the directory (read when
  the directory is, so ``check`` names a missing one; the path is the file's, never an argument's).
- Claude Code's command files (anywhere under ``.claude/commands/``, or in a directory said to hold
  them) and skills (``.claude/skills/NAME/SKILL.md``): read by Claude Code's rules
  (``claude_code.py``), never as templates.
- VS Code's prompt files (``NAME.prompt.md``): read by VS Code's rules (``vscode.py``).

A tool's file is read as its tool reads it: a name that is no valid prompt name is made into one,
and front matter that is not valid YAML is read line by line (the problem noted, the file served).
"""

from __future__ import annotations

import base64
import dataclasses
import mimetypes
import posixpath
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jinja2
import jinja2.meta
import yaml
from jinja2.sandbox import ImmutableSandboxedEnvironment

from gateway.protocol.meta_keys import TAGS_META_KEY
from gateway.sources.files import claude_code, vscode
from gateway.sources.files.common import YAML_ERRORS, Argument, lenient_front_matter, text_of, valid_name
from gateway.sources.files.kinds import Format, Kind, kind_of

MAX_FILE_BYTES = 256 * 1024
MAX_OUTPUT_CHARS = 512 * 1024
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*\r?\n?", re.DOTALL | re.MULTILINE)
_ROLE_MARKER = re.compile(r"^<!--\s*(user|assistant)\s*-->[ \t]*$", re.MULTILINE)
_ATTACHMENT = re.compile(r"^<!--[ \t]*(image|resource):[ \t]*(.*?)[ \t]*-->[ \t]*$", re.MULTILINE)
_NONCE = secrets.token_hex(8)  # marks where an attachment goes in rendered text: no argument can forge it
_PLACED = re.compile(rf"^<!-- attachment {_NONCE} ([0-9]+) -->$", re.MULTILINE)
MAX_ATTACHMENT_BYTES = 1024 * 1024
MAX_ATTACHMENTS = 16


class PromptFileError(Exception):
    """A file that cannot be served; the message names the file and, where known, the line."""


class NotOffered(Exception):
    """A file its own tool offers to no one (``user-invocable: false``): left out, and said so."""


class RenderError(Exception):
    """The prompt's arguments did not render (an undefined variable, the sandbox refused, too long).
    ``reason``: the same in words that hold no value (the audit records them), where the message
    quotes what the template engine said."""

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


@dataclass(frozen=True)
class Attachment:
    """A file a prompt embeds: an image, or a resource (text, else bytes), by its path in the directory."""

    kind: Literal["image", "resource"]
    path: str  # relative to the directory, normalised, never leaving it
    line: int

    def content(self, data: bytes, source: str) -> dict[str, Any]:
        """The content block for the file's bytes; PromptFileError (naming ``source`` and the line) for
        an image that is not one."""
        mime = mimetypes.guess_type(self.path)[0]
        if self.kind == "image":
            if mime is None or not mime.startswith("image/"):
                raise PromptFileError(f"{source}:{self.line}: {self.path} is not an image (png, jpeg, gif, webp...)")
            return {"type": "image", "data": base64.b64encode(data).decode(), "mimeType": mime}
        uri = f"prompt-file:{self.path}"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            blob = base64.b64encode(data).decode()
            return {
                "type": "resource",
                "resource": {"uri": uri, "mimeType": mime or "application/octet-stream", "blob": blob},
            }
        return {"type": "resource", "resource": {"uri": uri, "mimeType": mime or "text/plain", "text": text}}


@dataclass(frozen=True)
class FilePrompt:
    name: str
    kind: Kind
    body: str
    source: str  # the file, relative to the directory
    title: str | None = None
    description: str | None = None
    arguments: tuple[Argument, ...] = ()
    tags: tuple[str, ...] = ()
    _template: jinja2.Template | None = field(default=None, compare=False, repr=False)
    attachments: tuple[Attachment, ...] = ()
    _contents: tuple[dict[str, Any], ...] = field(default=(), compare=False, repr=False)
    _tool: claude_code.ClaudeCommand | vscode.VsCodePrompt | None = field(default=None, compare=False, repr=False)
    note: str | None = None  # what was read leniently (front matter that is not valid YAML, a renamed name)

    def attach(self, contents: Sequence[dict[str, Any]]) -> FilePrompt:
        """This prompt with its attachments' content blocks (one per attachment, in order)."""
        return dataclasses.replace(self, _contents=tuple(contents))

    def listed(self) -> dict[str, Any]:
        prompt: dict[str, Any] = {"name": self.name, "arguments": [a.as_listed() for a in self.arguments]}
        if self.title:
            prompt["title"] = self.title
        if self.description:
            prompt["description"] = self.description
        if self.tags:
            prompt["_meta"] = {TAGS_META_KEY: list(self.tags)}
        return prompt

    def render(self, given: Mapping[str, str]) -> list[dict[str, Any]]:
        """The prompt's messages for these arguments (checked against the declared ones first)."""
        values = self._arguments(given)
        if self._tool is not None:  # a tool's file is one message, as its tool sends it: no role markers
            text = self._tool.render_text(values)
            if len(text) > MAX_OUTPUT_CHARS:
                raise RenderError(f"the rendered prompt is over {MAX_OUTPUT_CHARS} characters")
            return [{"role": "user", "content": {"type": "text", "text": text.strip()}}]
        assert self._template is not None  # noqa: S101 - compiled when parsed
        text = _render_bounded(self._template, {**self._left_out(values), **values})
        if len(text) > MAX_OUTPUT_CHARS:
            raise RenderError(f"the rendered prompt is over {MAX_OUTPUT_CHARS} characters")
        return _messages(text, self._contents)

    def _arguments(self, given: Mapping[str, str]) -> dict[str, str]:
        declared = {a.name: a for a in self.arguments}
        unknown = sorted(set(given) - set(declared))
        if unknown:
            raise RenderError(f"unknown argument {unknown[0]!r} (this prompt takes: {', '.join(declared) or 'none'})")
        values: dict[str, str] = {}
        for argument in self.arguments:
            value = given.get(argument.name, argument.default)
            if value is None:
                if argument.required:
                    raise RenderError(f"missing required argument {argument.name!r}")
                continue
            if argument.values and value not in argument.values:
                raise RenderError(f"argument {argument.name!r} must be one of {', '.join(argument.values)}")
            values[argument.name] = value
        return values

    def _left_out(self, values: Mapping[str, str]) -> dict[str, jinja2.Undefined]:
        """The optional arguments the client left out (and no default fills in), as Jinja's ordinary
        undefined: rendered as nothing, false in an ``if``, not ``defined``, taking a ``default(...)``.
        The listing calls them optional, so leaving one out is no error; a variable the front matter does
        not name stays strictly undefined (it is a required argument, or a typo)."""
        return {a.name: jinja2.Undefined(name=a.name) for a in self.arguments if a.name not in values}

    def complete(self, argument: str, prefix: str) -> list[str]:
        for declared in self.arguments:
            if declared.name == argument:
                return [v for v in declared.values if v.startswith(prefix)][:100]
        return []


def _render_bounded(template: jinja2.Template, values: Mapping[str, str | jinja2.Undefined]) -> str:
    """The template's output, stopped as soon as it passes ``MAX_OUTPUT_CHARS`` (rendered piece by piece,
    never whole first). Whatever the template raises is the prompt's error, not the gateway's."""
    pieces: list[str] = []
    size = 0
    try:
        for piece in template.generate(**values):
            size += len(piece)
            if size > MAX_OUTPUT_CHARS:
                break
            pieces.append(piece)
    except jinja2.exceptions.SecurityError as exc:
        forbidden = "the template tried something the sandbox forbids"
        raise RenderError(f"{forbidden}: {exc}", reason=forbidden) from exc
    except Exception as exc:
        failed = f"the template did not render: {type(exc).__name__}"
        raise RenderError(f"{failed}: {exc}", reason=failed) from exc
    if size > MAX_OUTPUT_CHARS:
        raise RenderError(f"the rendered prompt is over {MAX_OUTPUT_CHARS} characters")
    return "".join(pieces)


def _messages(text: str, attachments: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The text cut at role markers into messages (text before the first marker is the user's), each
    attachment a message of its own, with the role of the section it is in."""
    messages: list[dict[str, Any]] = []
    role, start = "user", 0
    markers = sorted([*_ROLE_MARKER.finditer(text), *_PLACED.finditer(text)], key=lambda m: m.start())
    for marker in markers:
        chunk = text[start : marker.start()].strip()
        if chunk:
            messages.append({"role": role, "content": {"type": "text", "text": chunk}})
        start = marker.end()
        if marker.re is _PLACED:
            index = int(marker.group(1))
            if index < len(attachments):
                messages.append({"role": role, "content": attachments[index]})
        else:
            role = marker.group(1)
    chunk = text[start:].strip()
    if chunk or not messages:
        messages.append({"role": role, "content": {"type": "text", "text": chunk}})
    return messages


_ENVIRONMENT = ImmutableSandboxedEnvironment(
    undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True
)


def parse_prompt_file(relative: str, text: str, directory_format: Format = "auto") -> FilePrompt:
    """One file's prompt. Raises PromptFileError naming the file and line of the problem."""
    kind = kind_of(relative, directory_format)
    if kind is None:
        raise PromptFileError(f"{relative}: not a prompt file (*.md)")
    if len(text.encode()) > MAX_FILE_BYTES:
        raise PromptFileError(f"{relative}: over {MAX_FILE_BYTES} bytes")
    text = text.removeprefix("\ufeff")  # a byte order mark (editors on Windows write one) is not text
    if kind != "template":
        return _tool_file(relative, text, kind)
    meta, body, body_line = _front_matter(relative, text)
    stem = relative.rsplit("/", 1)[-1].removesuffix(".md")
    name = meta.get("name", stem if NAME.match(stem) else valid_name(stem))  # made into one, as the tools' are
    if not isinstance(name, str) or not NAME.match(name):
        raise PromptFileError(f"{relative}:1: name {name!r} must be 1-128 of letters, digits, '_', '-', '.'")
    note = f"{relative}: its name {stem!r} is served as {name!r}" if "name" not in meta and name != stem else None
    description = _text(relative, meta, "description")
    title = _text(relative, meta, "title")
    tags = _strings(relative, meta, "tags")
    arguments = _declared_arguments(relative, meta.get("arguments", []))
    attachments, body = _attachments(relative, body, body_line)
    try:
        source = _ENVIRONMENT.parse(body)
        template = _ENVIRONMENT.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        line = body_line + (exc.lineno or 1) - 1
        hint = ""
        if "$ARGUMENTS" in body or re.search(r"\$[0-9]", body):
            hint = ' (a Claude Code command? set format = "claude-code" on this upstream: docs/catalog.md)'
        raise PromptFileError(f"{relative}:{line}: template syntax: {exc.message}{hint}") from exc
    declared = {a.name for a in arguments}
    used = jinja2.meta.find_undeclared_variables(source) - declared - set(_ENVIRONMENT.globals)
    arguments += tuple(Argument(name, required=True) for name in sorted(used))
    return FilePrompt(name, kind, body, relative, title, description, arguments, tags, template, attachments, note=note)


def _tool_file(relative: str, text: str, kind: Kind) -> FilePrompt:
    """A Claude Code or VS Code file, read as its tool reads it: never refused for its front matter or
    its name (a name that is no valid prompt name is made into one, and noted)."""
    front = lenient_front_matter(text)
    if front.meta.get("user-invocable") is False:
        raise NotOffered(f"{relative}: user-invocable: false (Claude Code offers it to no one): not served")
    file_name = relative.rsplit("/", 1)[-1]
    if kind == "vscode-prompt":
        tool: claude_code.ClaudeCommand | vscode.VsCodePrompt
        tool, description, arguments = vscode.read(front)
        stem = file_name.removesuffix(".prompt.md")
    else:
        tool, description, arguments = claude_code.read(front)
        stem = relative.split("/")[-2] if file_name == "SKILL.md" else file_name.removesuffix(".md")
    wanted = wanted_name(front.meta.get("name"), stem)
    name = valid_name(wanted)
    notes = [front.problem] if front.problem else []
    if name != wanted:
        notes.append(f"its name {wanted!r} is served as {name!r}")
    if isinstance(tool, claude_code.ClaudeCommand):
        dropped = tool.hint_note(text_of(front.meta, "argument-hint"))
        notes += [dropped] if dropped else []
    title = front.meta.get("title")
    return FilePrompt(
        name,
        kind,
        front.body,
        relative,
        title=str(title) if isinstance(title, (str, int, float)) and not isinstance(title, bool) else None,
        description=description,
        arguments=arguments,
        _tool=tool,
        note=f"{relative}: " + "; ".join(notes) if notes else None,
    )


def wanted_name(given: Any, stem: str) -> str:
    """The name a file asks for: its front matter's ``name`` when that is text, else its file name."""
    return given.strip() if isinstance(given, str) and given.strip() else stem


def _attachments(relative: str, body: str, body_line: int) -> tuple[tuple[Attachment, ...], str]:
    """The attachment markers of a template's body, each replaced by a placeholder the renderer finds
    (and an argument cannot forge). Paths are relative to the prompt file and may not leave the
    directory: no absolute path, no ``..`` above it, nothing but a plain path."""
    found: list[Attachment] = []

    def place(match: re.Match[str]) -> str:
        line = body_line + body.count("\n", 0, match.start())
        where = f"{relative}:{line}"
        path = match.group(2)
        if len(found) >= MAX_ATTACHMENTS:
            raise PromptFileError(f"{where}: more than {MAX_ATTACHMENTS} attachments in one prompt")
        if not path or "\\" in path or "\x00" in path or ":" in path or path.startswith("/"):
            raise PromptFileError(f"{where}: {match.group(1)} path {path!r} must be a plain relative path")
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(relative), path))
        if joined == ".." or joined.startswith("../") or joined == ".":
            raise PromptFileError(f"{where}: {path!r} is outside the prompt directory")
        found.append(Attachment(match.group(1), joined, line))  # type: ignore[arg-type]
        return f"<!-- attachment {_NONCE} {len(found) - 1} -->"

    placed = _ATTACHMENT.sub(place, body)
    return tuple(found), placed


def _front_matter(relative: str, text: str) -> tuple[dict[str, Any], str, int]:
    """The front matter (empty without one), the body, and the body's first line number."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text, 1
    try:
        meta = yaml.safe_load(match.group(1)) or {}
    except YAML_ERRORS as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        raise PromptFileError(
            f"{relative}:{line}: front matter is not valid YAML: {getattr(exc, 'problem', exc)}"
        ) from exc
    if not isinstance(meta, dict):
        raise PromptFileError(f"{relative}:2: front matter must be a mapping of keys to values")
    return meta, text[match.end() :], text[: match.end()].count("\n") + 1


def _text(relative: str, meta: Mapping[str, Any], key: str) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise PromptFileError(f"{relative}: front matter {key} must be text")
    return str(value)


def _strings(relative: str, meta: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = meta.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise PromptFileError(f"{relative}: front matter {key} must be a list of text")
    return tuple(str(v) for v in value)


def _declared_arguments(relative: str, declared: Any) -> tuple[Argument, ...]:
    if not isinstance(declared, list):
        raise PromptFileError(f"{relative}: front matter arguments must be a list")
    arguments = []
    for index, item in enumerate(declared):
        where = f"{relative}: arguments[{index}]"
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].isidentifier():
            raise PromptFileError(f"{where}: needs a name that is an identifier (the template uses it)")
        default = item.get("default")
        values = _strings(where, item, "values")
        arguments.append(
            Argument(
                name=item["name"],
                description=_text(where, item, "description"),
                required=bool(item.get("required", False)),
                default=None if default is None else str(default),
                values=values,
            )
        )
    names = [a.name for a in arguments]
    if len(set(names)) != len(names):
        raise PromptFileError(f"{relative}: two arguments have the same name")
    return tuple(arguments)
