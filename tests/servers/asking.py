"""A handshake-era prompt server whose prompts ask the client something while they render, as FastMCP's
``ctx.elicit`` does: ``who`` (elicitation/create), ``muse`` (sampling/createMessage), ``where``
(roots/list)."""

from __future__ import annotations

from typing import Any

import mcp.types as t
from mcp import MCPError
from mcp.server.lowlevel.server import Server

from gateway import start_up
from tests.servers.common import run_stdio, text_result

start_up.resume()

PROMPTS = [t.Prompt(name=name) for name in ("who", "muse", "where")]


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    return t.ListPromptsResult(prompts=PROMPTS)


async def get_prompt(ctx: Any, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    session = ctx.session
    try:
        if params.name == "who":
            schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
            answer = await session.elicit_form("Who are you?", schema, related_request_id=ctx.request_id)
            return text_result(f"Hello, {(answer.content or {}).get('name')} ({answer.action})")
        if params.name == "muse":
            message = t.SamplingMessage(role="user", content=t.TextContent(type="text", text="a word?"))
            sampled = await session.create_message([message], max_tokens=5, related_request_id=ctx.request_id)
            return text_result(f"The model said: {sampled.content.text}")
        if params.name == "where":
            roots = await session.list_roots()
            return text_result("Roots: " + ", ".join(str(r.uri) for r in roots.roots))
    except MCPError as exc:
        return text_result(f"refused {exc.error.code}: {exc.error.message}")
    raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")


server = Server("asking", on_list_prompts=list_prompts, on_get_prompt=get_prompt)

if __name__ == "__main__":
    run_stdio(server)
