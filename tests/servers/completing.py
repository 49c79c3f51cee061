"""Prompts with arguments and context-aware completion."""

from __future__ import annotations

import mcp.types as t
from mcp import MCPError
from mcp.server.lowlevel.server import Server

from gateway import start_up
from tests.servers.common import run_stdio, text_result

start_up.resume()

CITIES = {"US": ["Austin", "Boston", "Chicago", "Denver"], "FR": ["Lyon", "Marseille", "Nice", "Paris"]}

PROMPTS = [
    t.Prompt(
        name="weather",
        description="Weather report for a city",
        arguments=[
            t.PromptArgument(name="country", required=True),
            t.PromptArgument(name="city", required=True),
            t.PromptArgument(name="units", required=False),
        ],
    ),
    t.Prompt(name="internal_notes", description="hidden by the upstream's own policy in tests"),
]


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    return t.ListPromptsResult(prompts=PROMPTS)


async def get_prompt(ctx: object, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    args = params.arguments or {}
    if params.name == "weather":
        return text_result(f"Weather in {args['city']}, {args['country']} ({args.get('units', 'metric')})")
    if params.name == "internal_notes":
        return text_result("secret notes")
    raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")


async def complete(ctx: object, params: t.CompleteRequestParams) -> t.CompleteResult:
    if not isinstance(params.ref, t.PromptReference) or params.ref.name != "weather":
        raise MCPError(code=-32602, message="no completions for that")
    value = params.argument.value
    if params.argument.name == "country":
        values = [c for c in CITIES if c.startswith(value.upper())]
    elif params.argument.name == "city":
        country = (params.context.arguments or {}).get("country") if params.context else None
        pool = CITIES.get(country or "", [c for cities in CITIES.values() for c in cities])
        values = [c for c in pool if c.lower().startswith(value.lower())]
    else:
        values = []
    return t.CompleteResult(completion=t.Completion(values=values, total=len(values), has_more=False))


server = Server("completing", on_list_prompts=list_prompts, on_get_prompt=get_prompt, on_completion=complete)

if __name__ == "__main__":
    run_stdio(server)
