"""Results reshaped for the revision the client speaks, sans I/O.

Upstreams of every revision feed one catalog, whose results are written in the newest shape. On the
way out each client gets what its own revision defines:

* modern clients (2026-07-28): ``resultType`` on every result and the gateway's ``serverInfo`` in
  ``_meta`` (an upstream's identity is not the identity of the server the client talks to);
* handshake clients: no ``resultType``, ``ttlMs``, ``cacheScope`` or reserved ``_meta`` keys, and
  content their revision cannot carry is rewritten into content it can, never silently dropped:
  ``audio`` (2025-03-26+) becomes an embedded blob resource with the audio's MIME type, lossless;
  ``resource_link`` (2025-06-18+) becomes a text block naming the link, its URI and MIME type.
  Tools (prompts as tools) lose the fields their revision lacks: ``annotations`` before 2025-03-26,
  ``title``, ``outputSchema`` and ``structuredContent`` before 2025-06-18, ``icons`` before 2025-11-25.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.protocol.jsonrpc import JSON_OBJECT
from gateway.protocol.modern import RESERVED_PREFIX, SERVER_INFO_KEY
from gateway.protocol.versions import at_least, is_modern

MODERN_ONLY_RESULT_FIELDS = ("resultType", "ttlMs", "cacheScope")
AUDIO_URI_PREFIX = "urn:mcp-prompt-gateway:audio:"


def for_client(method: str, result: dict[str, Any], version: str, server_info: Mapping[str, Any]) -> dict[str, Any]:
    """``result`` as a client speaking ``version`` may receive it."""
    if is_modern(version):
        meta = result.get("_meta")
        stamped = {**meta, SERVER_INFO_KEY: dict(server_info)} if isinstance(meta, JSON_OBJECT) else None
        out = {**result, "_meta": stamped or {SERVER_INFO_KEY: dict(server_info)}}
        out.setdefault("resultType", "complete")
        return out
    out = {key: value for key, value in result.items() if key not in MODERN_ONLY_RESULT_FIELDS}
    meta = out.get("_meta")
    if meta is not None and isinstance(meta, JSON_OBJECT) and any(key.startswith(RESERVED_PREFIX) for key in meta):
        kept = {key: value for key, value in meta.items() if not key.startswith(RESERVED_PREFIX)}
        if kept:
            out["_meta"] = kept
        else:
            del out["_meta"]
    if method == "prompts/get" and isinstance(out.get("messages"), list):
        out["messages"] = [_message_for(message, version, i) for i, message in enumerate(out["messages"])]
    if method == "tools/list" and isinstance(out.get("tools"), list):
        out["tools"] = [_tool_for(tool, version) for tool in out["tools"]]
    if method == "tools/call":
        if not at_least(version, "2025-06-18"):
            out.pop("structuredContent", None)
        if isinstance(out.get("content"), list):
            out["content"] = [
                content_for(block, version, i) if isinstance(block, JSON_OBJECT) else block
                for i, block in enumerate(out["content"])
            ]
    return out


_TOOL_FIELDS_SINCE = {
    "annotations": "2025-03-26",
    "title": "2025-06-18",
    "outputSchema": "2025-06-18",
    "icons": "2025-11-25",
}


def _tool_for(tool: Any, version: str) -> Any:
    if not isinstance(tool, JSON_OBJECT):
        return tool
    return {key: value for key, value in tool.items() if at_least(version, _TOOL_FIELDS_SINCE.get(key, "2024-11-05"))}


def _message_for(message: Any, version: str, index: int) -> Any:
    if not isinstance(message, JSON_OBJECT):
        return message
    content = message.get("content")
    if not isinstance(content, JSON_OBJECT):
        return message
    adapted = content_for(content, version, index)
    return message if adapted is content else {**message, "content": adapted}


def content_for(content: Mapping[str, Any], version: str, index: int = 0) -> Mapping[str, Any]:
    """One content block in a form ``version`` defines (the block itself when it already is)."""
    kind = content.get("type")
    kept = {"annotations": content["annotations"]} if "annotations" in content else {}
    if kind == "audio" and not at_least(version, "2025-03-26"):
        resource = {
            "uri": f"{AUDIO_URI_PREFIX}{index}",
            "mimeType": content.get("mimeType"),
            "blob": content.get("data"),
        }
        return {"type": "resource", "resource": resource, **kept}
    if kind == "resource_link" and not at_least(version, "2025-06-18"):
        label = content.get("title") or content.get("name") or "resource"
        text = f"Resource link: {label} <{content.get('uri')}>"
        if content.get("mimeType"):
            text += f" ({content['mimeType']})"
        if content.get("description"):
            text += f" - {content['description']}"
        return {"type": "text", "text": text, **kept}
    return content
