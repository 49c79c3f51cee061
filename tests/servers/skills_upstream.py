"""An upstream serving Agent Skills over the Skills extension (SEP-2640) with the official SDK's low-level
server: the extension declared under ``capabilities.extensions`` (the SDK's SEP-2133 map), ``skills/list``,
``skills/get`` and ``resources/directory/read`` added as request methods, the files served by
``resources/list`` and ``resources/read``. Every request it receives is checked against the spec's shapes
(``gateway.protocol.skills``), and every entry it sends too, so a test through it fails on either side's
mistake. ``SKILLS_TAMPERED=1``: one file's bytes are not what its manifest says (a server changed under a
client, or one lying)."""

from __future__ import annotations

import base64
import os
from typing import Any

import mcp.types as t
from mcp import MCPError
from mcp.server.lowlevel.server import Server

from gateway.protocol.skills import (
    EXTENSION_ID,
    GetSkillParams,
    ListSkillsParams,
    ListSkillsResult,
    ReadDirectoryParams,
    ReadResourceParams,
    Skill,
    digest_of,
)
from tests.servers.common import run_stdio, text_result

PDF = b"""---
name: pdf-processing
description: Extract, fill, and assemble PDF documents
---
Use templates/invoice.md.
"""
REFUNDS = b"""---
name: refunds
description: How refunds are handled
license: MIT
---
Refund within 30 days.
"""
FILES: dict[str, bytes] = {
    "skill://pdf-processing/SKILL.md": PDF,
    "skill://pdf-processing/templates/invoice.md": b"Invoice template\n",
    "skill://pdf-processing/logo.png": b"\x89PNG\r\n\x1a\n\xff",
    "skill://acme/billing/refunds/SKILL.md": REFUNDS,
}
SKILLS = {
    "skill://pdf-processing/SKILL.md": {
        "name": "pdf-processing",
        "description": "Extract, fill, and assemble PDF documents",
    },
    "skill://acme/billing/refunds/SKILL.md": {
        "name": "refunds",
        "description": "How refunds are handled",
        "license": "MIT",
    },
}
TAMPERED = os.environ.get("SKILLS_TAMPERED") == "1"


class UriParams(t.RequestParams):
    uri: str
    cursor: str | None = None


class CursorParams(t.RequestParams):
    cursor: str | None = None


def _checked(model: type[Any], params: t.RequestParams) -> None:
    """What the gateway sent, checked against the spec's shape (-32602 naming the breach)."""
    try:
        model.model_validate(params.model_dump(exclude_none=True, exclude={"meta"}, by_alias=True))
    except ValueError as exc:
        raise MCPError(code=-32602, message=f"not the spec's params: {exc}") from None


def entry(uri: str) -> dict[str, Any]:
    root = uri.removesuffix("/SKILL.md")
    files = [u for u in FILES if u.startswith(root + "/")]
    skill = {
        "uri": uri,
        "frontmatter": SKILLS[uri],
        "resources": [{"uri": u, "digest": digest_of(FILES[u]), "size": len(FILES[u])} for u in files],
    }
    Skill.model_validate(skill)
    return skill


async def list_skills(ctx: object, params: CursorParams) -> dict[str, Any]:
    _checked(ListSkillsParams, params)
    uris = list(SKILLS)
    start = int(params.cursor or 0)
    result: dict[str, Any] = {"skills": [entry(uris[start])]}  # a page each: the gateway follows the cursor
    if start + 1 < len(uris):
        result["nextCursor"] = str(start + 1)
    ListSkillsResult.model_validate(result)
    return result


async def get_skill(ctx: object, params: UriParams) -> dict[str, Any]:
    _checked(GetSkillParams, params)
    if params.uri not in SKILLS:
        raise MCPError(code=-32602, message=f"No skill at {params.uri}")
    return {"skill": entry(params.uri)}


async def read_directory(ctx: object, params: UriParams) -> dict[str, Any]:
    _checked(ReadDirectoryParams, params)
    children = {u[len(params.uri) + 1 :].split("/", 1)[0] for u in FILES if u.startswith(params.uri + "/")}
    return {"resources": [{"uri": f"{params.uri}/{name}", "name": name} for name in sorted(children)]}


async def list_resources(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListResourcesResult:
    return t.ListResourcesResult(resources=[t.Resource(uri=u, name=u.rsplit("/", 1)[-1]) for u in FILES])


async def read_resource(ctx: object, params: t.ReadResourceRequestParams) -> t.ReadResourceResult:
    _checked(ReadResourceParams, params)
    data = FILES.get(str(params.uri))
    if data is None:
        raise MCPError(code=-32602, message=f"Resource not found: {params.uri}")
    if TAMPERED and str(params.uri).endswith("invoice.md"):
        data = b"Invoice template, changed behind the manifest\n"
    if str(params.uri).endswith(".png"):
        blob = base64.b64encode(data).decode()
        return t.ReadResourceResult(contents=[t.BlobResourceContents(uri=params.uri, mime_type="image/png", blob=blob)])
    return t.ReadResourceResult(contents=[t.TextResourceContents(uri=params.uri, text=data.decode())])


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    return t.ListPromptsResult(prompts=[t.Prompt(name="hello")])


async def get_prompt(ctx: object, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    return text_result("hello")


server = Server(
    "skills-upstream",
    on_list_prompts=list_prompts,
    on_get_prompt=get_prompt,
    on_list_resources=list_resources,
    on_read_resource=read_resource,
)
server.extensions = {EXTENSION_ID: {"directoryRead": True}}
server.add_request_handler("skills/list", CursorParams, list_skills)
server.add_request_handler("skills/get", UriParams, get_skill)
server.add_request_handler("resources/directory/read", UriParams, read_directory)

if __name__ == "__main__":
    run_stdio(server)
