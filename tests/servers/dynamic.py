"""A prompt list that changes at run time, announced with notifications/prompts/list_changed: to
handshake-era clients on their session, to 2026-07-28 clients on their subscriptions/listen streams.

Control prompts (called through the gateway like any prompt): ``add`` (argument ``name``) adds a
prompt and announces it once; ``storm`` (argument ``count``) announces ``count`` times in a burst.
"""

from __future__ import annotations

import json
import os
import sys

import mcp.types as t
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, PromptsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gateway import start_up
from tests.servers.common import run_stdio, text_result

start_up.resume()

prompts: dict[str, t.Prompt] = {
    "pid": t.Prompt(name="pid", description="answers with the server's process id"),
    "whoami": t.Prompt(name="whoami", description="answers with the credentials this server received (HTTP)"),
    "add": t.Prompt(name="add", arguments=[t.PromptArgument(name="name", required=True)]),
    "storm": t.Prompt(name="storm", arguments=[t.PromptArgument(name="count", required=True)]),
}


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    return t.ListPromptsResult(prompts=list(prompts.values()))


async def announce(ctx: ServerRequestContext) -> None:
    if is_modern(ctx):
        await bus.publish(PromptsListChanged())
    else:
        await ctx.session.send_prompt_list_changed()


def is_modern(ctx: ServerRequestContext) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


async def get_prompt(ctx: ServerRequestContext, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    args = params.arguments or {}
    if params.name == "add":
        prompts[args["name"]] = t.Prompt(name=args["name"], description="added at run time")
        await announce(ctx)
        return text_result(f"added {args['name']}")
    if params.name == "storm":
        for _ in range(int(args["count"])):
            await announce(ctx)
        return text_result(f"announced {args['count']} times")
    if params.name == "whoami":
        headers = ctx.request.headers if ctx.request is not None else {}
        seen = {k: headers.get(k) for k in ("authorization", "x-upstream-key")}
        return text_result(json.dumps(seen))
    if params.name == "pid":
        return text_result(str(os.getpid()))
    if params.name in prompts:
        return text_result(f"this is {params.name}")
    raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")


bus = InMemorySubscriptionBus()
server = Server(
    "dynamic", on_list_prompts=list_prompts, on_get_prompt=get_prompt, on_subscriptions_listen=ListenHandler(bus)
)

if __name__ == "__main__":
    print("dynamic server starting", file=sys.stderr, flush=True)
    run_stdio(server, list_changed=True)
