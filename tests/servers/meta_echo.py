"""A prompt whose text is what its request carried: the ``_meta`` the server received and, over HTTP,
the trace headers (what a tracing test reads to follow the context the gateway sent upstream); and one
that refuses with an error quoting its argument's value, as servers' validation errors do."""

from __future__ import annotations

import json
from typing import Any

import mcp.types as t
from mcp import MCPError
from mcp.server.lowlevel.server import Server

from gateway import start_up
from tests.servers.common import run_stdio, text_result

start_up.resume()

PROMPTS = [
    t.Prompt(name="echo", description="says what its request carried"),
    t.Prompt(
        name="refuse",
        description="refuses, quoting its argument",
        arguments=[t.PromptArgument(name="value", required=True)],
    ),
]
TRACE_HEADERS = ("traceparent", "tracestate", "baggage")


async def list_prompts(ctx: Any, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    return t.ListPromptsResult(prompts=PROMPTS)


async def get_prompt(ctx: Any, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    if params.name == "refuse":
        raise MCPError(code=-32602, message=f"cannot use {(params.arguments or {}).get('value')!r}")
    if params.name != "echo":
        raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None) or {}
    carried = {
        "meta": dict(params.meta or {}),
        "headers": {name: headers[name] for name in TRACE_HEADERS if name in headers},
    }
    return text_result(json.dumps(carried))


server = Server("meta-echo", on_list_prompts=list_prompts, on_get_prompt=get_prompt)

if __name__ == "__main__":
    run_stdio(server)
