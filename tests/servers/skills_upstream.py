"""An upstream serving Agent Skills over the Skills extension (SEP-2640) with the official SDK's low-level
server: the extension declared under ``capabilities.extensions`` (the SDK's SEP-2133 map), ``skills/list``,
``skills/get`` and ``resources/directory/read`` added as request methods, the files served by
``resources/list`` and ``resources/read``. Every request it receives is checked against the spec's shapes
(``gateway.protocol.skills``), and every entry it sends too, so a test through it fails on either side's
mistake. ``SKILLS_TAMPERED=1``: one file's bytes are not what its manifest says (a server changed under a
client, or one lying). ``SKILLS_NO_PROMPTS=1``: a server of skills alone (no prompts capability).

Its skills change at run time through control prompts: ``change-skills`` edits the invoice template
(new bytes, new digest) and adds an ``onboarding`` skill, then announces it as the spec's resources
list change (on the session, or the 2026-07-28 listen stream); ``requests`` answers with how many of
each request it has received, so a test sees what the gateway asked for without timing anything."""

from __future__ import annotations

import base64
import json
import os
from collections import Counter
from typing import Any

import mcp.types as t
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourcesListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gateway import start_up
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

start_up.resume()

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
NO_PROMPTS = os.environ.get("SKILLS_NO_PROMPTS") == "1"
ONBOARDING = b"""---
name: onboarding
description: Added while the server runs
---
Welcome.
"""
received: Counter[str] = Counter()


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
    received["skills/list"] += 1
    _checked(ListSkillsParams, params)
    uris = list(SKILLS)
    start = int(params.cursor or 0)
    result: dict[str, Any] = {"skills": [entry(uris[start])]}  # a page each: the gateway follows the cursor
    if start + 1 < len(uris):
        result["nextCursor"] = str(start + 1)
    ListSkillsResult.model_validate(result)
    return result


async def get_skill(ctx: object, params: UriParams) -> dict[str, Any]:
    received["skills/get"] += 1
    _checked(GetSkillParams, params)
    if params.uri not in SKILLS:
        raise MCPError(code=-32602, message=f"No skill at {params.uri}")
    return {"skill": entry(params.uri)}


async def read_directory(ctx: object, params: UriParams) -> dict[str, Any]:
    received["resources/directory/read"] += 1
    _checked(ReadDirectoryParams, params)
    children = {u[len(params.uri) + 1 :].split("/", 1)[0] for u in FILES if u.startswith(params.uri + "/")}
    return {"resources": [{"uri": f"{params.uri}/{name}", "name": name} for name in sorted(children)]}


async def list_resources(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListResourcesResult:
    return t.ListResourcesResult(resources=[t.Resource(uri=u, name=u.rsplit("/", 1)[-1]) for u in FILES])


async def read_resource(ctx: object, params: t.ReadResourceRequestParams) -> t.ReadResourceResult:
    received["resources/read"] += 1
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
    return t.ListPromptsResult(prompts=[t.Prompt(name=n) for n in ("hello", "change-skills", "requests")])


async def get_prompt(ctx: ServerRequestContext, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    if params.name == "requests":
        return text_result(json.dumps(received))
    if params.name == "change-skills":
        FILES["skill://pdf-processing/templates/invoice.md"] = b"Invoice template, second edition\n"
        FILES["skill://onboarding/SKILL.md"] = ONBOARDING
        SKILLS["skill://onboarding/SKILL.md"] = {"name": "onboarding", "description": "Added while the server runs"}
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await bus.publish(ResourcesListChanged())
        else:
            await ctx.session.send_resource_list_changed()
        return text_result("changed")
    return text_result("hello")


bus = InMemorySubscriptionBus()
server = Server(
    "skills-upstream",
    on_list_prompts=None if NO_PROMPTS else list_prompts,
    on_get_prompt=None if NO_PROMPTS else get_prompt,
    on_list_resources=list_resources,
    on_read_resource=read_resource,
    on_subscriptions_listen=ListenHandler(bus),
)
server.extensions = {EXTENSION_ID: {"directoryRead": True}}
server.add_request_handler("skills/list", CursorParams, list_skills)
server.add_request_handler("skills/get", UriParams, get_skill)
server.add_request_handler("resources/directory/read", UriParams, read_directory)

if __name__ == "__main__":
    run_stdio(server, list_changed=True, resources_changed=True)
