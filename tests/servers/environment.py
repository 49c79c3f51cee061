"""A server whose one prompt, ``environment``, answers with the environment it was started with (JSON):
what a real upstream process receives from the gateway, seen from inside it."""

from __future__ import annotations

import json
import os

import mcp.types as t
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from tests.servers.common import run_stdio, text_result


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    return t.ListPromptsResult(prompts=[t.Prompt(name="environment", description="this server's environment")])


async def get_prompt(ctx: ServerRequestContext, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    if params.name != "environment":
        raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")
    return text_result(json.dumps(dict(os.environ)))


server = Server("environment", on_list_prompts=list_prompts, on_get_prompt=get_prompt)

if __name__ == "__main__":
    run_stdio(server)
