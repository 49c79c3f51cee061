"""Prompts as tools (``[server] prompts_as_tools``), sans I/O: the two tool definitions and the results.

Many clients and agent frameworks call tools and never prompts. With the option the gateway also
declares ``tools`` and serves two: ``list_prompts`` (optional ``query`` and ``tag`` filters) and
``get_prompt`` (``name``, ``arguments``). They go through the same catalog as the prompt methods, so
policy and views apply exactly as they do there: a prompt a caller cannot list or get is just as
absent through the tools.

``get_prompt``'s input schema lists the caller's prompt names (``enum``) while there are at most
``MAX_NAMES_IN_SCHEMA`` of them, so a model picks a real name; the tool list therefore changes with
the catalog, and ``notifications/tools/list_changed`` goes wherever ``prompts/list_changed`` goes.

Results carry the rendered messages as content (what an agent pastes into its context) and, for
clients of 2025-06-18 and later, the whole result with roles as ``structuredContent``. A problem with
the call itself (an unknown or hidden prompt, a missing argument, an upstream down) is a tool error
(``isError``) the model can read and correct, as the spec asks; an unknown tool is ``-32602``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.protocol.errors import InvalidParams, shown
from gateway.protocol.meta_keys import TAGS_META_KEY

LIST_TOOL = "list_prompts"
GET_TOOL = "get_prompt"
MAX_NAMES_IN_SCHEMA = 100
MAX_QUERY_CHARS = 1024

_LISTED_PROMPT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "arguments": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "required": {"type": "boolean"},
                },
                "required": ["name"],
            },
        },
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name"],
}
_MESSAGE = {
    "type": "object",
    "properties": {"role": {"type": "string", "enum": ["user", "assistant"]}, "content": {"type": "object"}},
    "required": ["role", "content"],
}
_READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def tool_definitions(names: Sequence[str]) -> list[dict[str, Any]]:
    """The two tools, in the newest shape (``eras.for_client`` drops what older revisions lack)."""
    name_schema: dict[str, Any] = {"type": "string", "description": "The prompt's name, as list_prompts gives it."}
    if len(names) <= MAX_NAMES_IN_SCHEMA:
        name_schema["enum"] = list(names)
    return [
        {
            "name": LIST_TOOL,
            "title": "List prompts",
            "description": (
                "Lists the prompts this gateway offers you: name, title, description, arguments and tags. "
                "Call get_prompt with one of the names to receive the prompt itself."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {
                        "type": "string",
                        "description": "Only prompts whose name, title or description contains this (any case).",
                    },
                    "tag": {"type": "string", "description": "Only prompts carrying this tag."},
                },
                "additionalProperties": False,
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "prompts": {"type": "array", "items": _LISTED_PROMPT},
                    "unavailable": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["prompts"],
            },
            "annotations": {"title": "List prompts", **_READ_ONLY},
        },
        {
            "name": GET_TOOL,
            "title": "Get a prompt",
            "description": (
                "Renders one prompt with its arguments and returns its messages. "
                "list_prompts says which arguments each prompt takes."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": name_schema,
                    "arguments": {
                        "type": "object",
                        "description": "The prompt's arguments by name; every value is a string.",
                        "additionalProperties": {"type": "string"},
                    },
                },
                "required": ["name"],
                "additionalProperties": False,
            },
            "outputSchema": {
                "type": "object",
                "properties": {"description": {"type": "string"}, "messages": {"type": "array", "items": _MESSAGE}},
                "required": ["messages"],
            },
            "annotations": {"title": "Get a prompt", **_READ_ONLY},
        },
    ]


@dataclass(frozen=True)
class ListCall:
    query: str | None
    tag: str | None


@dataclass(frozen=True)
class GetCall:
    name: str
    arguments: dict[str, str]


class ToolInputError(ValueError):
    """The tool's input does not match its schema: told to the model as a tool error."""


def parse_call(params: Mapping[str, Any] | None) -> ListCall | GetCall:
    """A ``tools/call`` request's tool and input. An unknown tool is a protocol error (-32602); input
    that does not match the schema raises ToolInputError (a tool error the model can correct)."""
    params = params or {}
    tool = params.get("name")
    if tool not in (LIST_TOOL, GET_TOOL):
        named = shown(tool if isinstance(tool, str) else json.dumps(tool, default=str))
        raise InvalidParams(f"Unknown tool: {named} (this gateway's tools are {LIST_TOOL} and {GET_TOOL})")
    given = params.get("arguments")
    given = {} if given is None else given
    if not isinstance(given, Mapping):
        raise ToolInputError("the tool's arguments must be an object")
    if tool == LIST_TOOL:
        extra = sorted(set(given) - {"query", "tag"})
        if extra:
            raise ToolInputError(f"{LIST_TOOL} takes query and tag only, not {shown(extra[0])}")
        return ListCall(_optional_text(given, "query"), _optional_text(given, "tag"))
    extra = sorted(set(given) - {"name", "arguments"})
    if extra:
        raise ToolInputError(f"{GET_TOOL} takes name and arguments only, not {shown(extra[0])}")
    name = given.get("name")
    if not isinstance(name, str) or not name:
        raise ToolInputError(f"{GET_TOOL} needs the prompt's name (a string); list_prompts gives the names")
    arguments = given.get("arguments")
    arguments = {} if arguments is None else arguments
    if not isinstance(arguments, Mapping) or not all(isinstance(v, str) for v in arguments.values()):
        raise ToolInputError("arguments must be an object whose values are all strings")
    return GetCall(name, {str(k): v for k, v in arguments.items()})


def _optional_text(given: Mapping[str, Any], key: str) -> str | None:
    value = given.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolInputError(f"{key} must be a string")
    return value[:MAX_QUERY_CHARS]


def tags_of(prompt: Mapping[str, Any]) -> list[str]:
    meta = prompt.get("_meta")
    tags = meta.get(TAGS_META_KEY) if isinstance(meta, Mapping) else None
    return [tag for tag in tags if isinstance(tag, str)] if isinstance(tags, list) else []


def stands_for(params: Mapping[str, Any] | None) -> tuple[str, dict[str, Any] | None] | None:
    """The prompt method a ``tools/call`` is served as, with what it asks of it (the prompt's name), for
    the rate limits and the audit; None for any other tool or a call that cannot be read (refused later)."""
    tool = params.get("name") if isinstance(params, Mapping) else None
    if tool == LIST_TOOL:
        return "prompts/list", None
    if tool == GET_TOOL:
        given = params.get("arguments") if isinstance(params, Mapping) else None
        name = given.get("name") if isinstance(given, Mapping) else None
        return "prompts/get", {"name": name} if isinstance(name, str) else None
    return None


def list_result(
    prompts: Sequence[Mapping[str, Any]], call: ListCall, unavailable: Sequence[str] = ()
) -> dict[str, Any]:
    """The prompts matching the call's filters, as content (JSON text) and as structured content; with the
    upstreams that could not be listed (``unavailable``), so that a model can tell "none match" from "its
    server is down" (a tester's empty answer said nothing of the upstream that was)."""
    needle = call.query.casefold() if call.query else None
    found: list[dict[str, Any]] = []
    for prompt in prompts:
        tags = tags_of(prompt)
        if call.tag is not None and call.tag not in tags:
            continue
        fields = {key: prompt[key] for key in ("name", "title", "description", "arguments") if key in prompt}
        if needle is not None:
            text = " ".join(str(fields.get(key, "")) for key in ("name", "title", "description")).casefold()
            if needle not in text:
                continue
        if tags:
            fields["tags"] = tags
        found.append(fields)
    structured: dict[str, Any] = {"prompts": found}
    if unavailable:
        structured["unavailable"] = list(unavailable)
    return {
        "content": [{"type": "text", "text": json.dumps(structured, ensure_ascii=False)}],
        "structuredContent": structured,
    }


def get_result(rendered: Mapping[str, Any]) -> dict[str, Any]:
    """A rendered prompt as a tool result: its messages' content in order, the whole as structured content."""
    messages = [m for m in rendered.get("messages", []) if isinstance(m, Mapping)]
    structured: dict[str, Any] = {"messages": [dict(m) for m in messages]}
    if isinstance(rendered.get("description"), str):
        structured["description"] = rendered["description"]
    content = [m["content"] for m in messages if isinstance(m.get("content"), Mapping)]
    return {"content": content, "structuredContent": structured}


def error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}
