"""Shared plumbing: run an SDK low-level server over stdio."""

from __future__ import annotations

import anyio
import mcp.types as t
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.stdio import stdio_server


def run_stdio(server: Server, *, list_changed: bool = False, resources_changed: bool = False) -> None:
    async def main() -> None:
        async with stdio_server() as (read, write):
            notifications = NotificationOptions(prompts_changed=list_changed, resources_changed=resources_changed)
            options = server.create_initialization_options(notifications)
            await server.run(read, write, options)

    anyio.run(main)


def text_result(text: str) -> t.GetPromptResult:
    return t.GetPromptResult(messages=[t.PromptMessage(role="user", content=t.TextContent(type="text", text=text))])
