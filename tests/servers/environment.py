"""A server whose prompt ``environment`` answers with the environment it was started with (JSON), and
``descriptors`` with what its open file descriptors are (JSON, number to target): what a real upstream
process receives from the gateway, seen from inside it."""

from __future__ import annotations

import json
import os

import mcp.types as t
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from gateway import start_up
from tests.servers.common import run_stdio, text_result

start_up.resume()


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    return t.ListPromptsResult(
        prompts=[
            t.Prompt(name="environment", description="this server's environment"),
            t.Prompt(name="descriptors", description="this server's open file descriptors"),
        ]
    )


async def get_prompt(ctx: ServerRequestContext, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    if params.name == "descriptors":
        return text_result(json.dumps({fd: _target(fd) for fd in os.listdir("/proc/self/fd")}))
    if params.name != "environment":
        raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")
    return text_result(json.dumps(dict(os.environ)))


def _target(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "?"


server = Server("environment", on_list_prompts=list_prompts, on_get_prompt=get_prompt)

if __name__ == "__main__":
    run_stdio(server)
