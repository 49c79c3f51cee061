"""Prompts as the reference fetch server lists them, answering as servers on the SDK before 2.0 did
(its low-level server turned any exception into a JSON-RPC error with code 0): ``fetch`` (``url``,
optional ``max_length``) answers an argument it does not take with ``code 0, "Error rendering prompt
fetch"``; ``today`` lists no arguments and answers any it is sent the same way."""

from __future__ import annotations

import mcp.types as t
from mcp import MCPError
from mcp.server.lowlevel.server import Server

from gateway import start_up
from tests.servers.common import run_stdio, text_result

start_up.resume()

PROMPTS = [
    t.Prompt(
        name="fetch",
        description="Fetch a URL and extract its contents as markdown",
        arguments=[
            t.PromptArgument(name="url", description="URL to fetch", required=True),
            t.PromptArgument(name="max_length", description="at most this many characters", required=False),
        ],
    ),
    t.Prompt(name="today", description="What day it is"),
]
TAKES = {prompt.name: {a.name for a in prompt.arguments or ()} for prompt in PROMPTS}


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    return t.ListPromptsResult(prompts=PROMPTS)


async def get_prompt(ctx: object, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    args = params.arguments or {}
    if params.name not in TAKES:
        raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")
    if set(args) - TAKES[params.name]:
        raise MCPError(code=0, message=f"Error rendering prompt {params.name}")
    if params.name == "today":
        return text_result("a fine day")
    return text_result(f"fetch {args['url']} (at most {args.get('max_length', '5000')} characters)")


server = Server("arguments", on_list_prompts=list_prompts, on_get_prompt=get_prompt)

if __name__ == "__main__":
    run_stdio(server)
