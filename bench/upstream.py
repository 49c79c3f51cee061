"""The benchmark upstream: an official-SDK prompt server, as real servers are built.

Environment: PROMPTS (count, default 20), PAGE (page size, 0 = one page), DELAY_MS (added to each
prompts/list), SERVE (``stdio`` or ``http``; http prints its port first), ANNOUNCE (0: no
``listChanged`` capability, so the gateway caches none of its pages). Prompts: ``p00000``...,
plus ``touch`` (announces list_changed) and ``calls`` (how many prompts/list it has answered).
"""

from __future__ import annotations

import os
import socket

import anyio
import mcp.types as t
import uvicorn
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, PromptsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

COUNT = int(os.environ.get("PROMPTS", "20"))
PAGE = int(os.environ.get("PAGE", "0"))
DELAY = float(os.environ.get("DELAY_MS", "0")) / 1000
PROMPTS = [
    t.Prompt(
        name=f"p{i:05d}",
        description=f"benchmark prompt {i}",
        arguments=[t.PromptArgument(name="topic", required=False)],
    )
    for i in range(COUNT)
]
PROMPTS += [t.Prompt(name="touch"), t.Prompt(name="calls")]
list_calls = 0


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    global list_calls
    list_calls += 1
    if DELAY:
        await anyio.sleep(DELAY)
    if not PAGE:
        return t.ListPromptsResult(prompts=PROMPTS)
    start = int(params.cursor) if params and params.cursor else 0
    end = start + PAGE
    return t.ListPromptsResult(prompts=PROMPTS[start:end], next_cursor=str(end) if end < len(PROMPTS) else None)


def text(value: str) -> t.GetPromptResult:
    return t.GetPromptResult(messages=[t.PromptMessage(role="user", content=t.TextContent(type="text", text=value))])


async def get_prompt(ctx: ServerRequestContext, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    if params.name == "touch":  # announced as each era does: on the session, or on listen streams
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await bus.publish(PromptsListChanged())
        else:
            await ctx.session.send_prompt_list_changed()
        return text("touched")
    if params.name == "calls":
        return text(str(list_calls))
    if params.name.startswith("p"):
        return text(f"Write about {(params.arguments or {}).get('topic', 'anything')} ({params.name}).")
    raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")


bus = InMemorySubscriptionBus()
server = Server(
    "bench-upstream", on_list_prompts=list_prompts, on_get_prompt=get_prompt, on_subscriptions_listen=ListenHandler(bus)
)
OPTIONS = NotificationOptions(prompts_changed=os.environ.get("ANNOUNCE", "1") == "1")


async def serve_stdio() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options(OPTIONS))


def main() -> None:
    if os.environ.get("SERVE", "stdio") == "stdio":
        anyio.run(serve_stdio)
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY on accept
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    print(sock.getsockname()[1], flush=True)
    app = server.streamable_http_app(streamable_http_path="/mcp", json_response=True)
    config = uvicorn.Config(app, log_level="error", lifespan="on")
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    main()
