"""A prompt the test holds in flight for as long as it wants, on the official SDK's server.

``held`` (arguments ``entered`` and ``release``, the paths of two named pipes) opens ``entered`` for
writing, which blocks until the test opens it for reading: the test then knows for sure the request has
reached this server. It then opens ``release`` for reading, which blocks until the test opens it for
writing, and answers with this server's process id. ``pid`` answers with the process id at once, so a
test can tell which of two generations of the server a request reached; ``who`` asks the client for a
name (``elicitation/create``, in the request's own handshake-era session) and answers with it and the
process id. The waits run in a worker thread: the server goes on answering everything else meanwhile.
"""

from __future__ import annotations

import os
import sys

import anyio
import mcp.types as t
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from gateway import start_up
from tests.servers.common import run_stdio, text_result

start_up.resume()

PROMPTS = [
    t.Prompt(
        name="held",
        arguments=[t.PromptArgument(name="entered", required=True), t.PromptArgument(name="release", required=True)],
    ),
    t.Prompt(name="pid", description="answers with the server's process id"),
    t.Prompt(name="who", description="asks the client for a name"),
]


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    return t.ListPromptsResult(prompts=PROMPTS)


def _open_and_close(path: str, flags: int) -> None:
    os.close(os.open(path, flags))


async def get_prompt(ctx: ServerRequestContext, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    args = params.arguments or {}
    if params.name == "held":
        # (abandoned when the server stops: its end of input ends it, not a signal after a wait)
        await anyio.to_thread.run_sync(_open_and_close, args["entered"], os.O_WRONLY, abandon_on_cancel=True)
        await anyio.to_thread.run_sync(_open_and_close, args["release"], os.O_RDONLY, abandon_on_cancel=True)
        return text_result(f"held by {os.getpid()}")
    if params.name == "pid":
        return text_result(str(os.getpid()))
    if params.name == "who":
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        try:
            answer = await ctx.session.elicit_form("Who are you?", schema, related_request_id=ctx.request_id)
        except MCPError as exc:
            return text_result(f"refused by {os.getpid()}: {exc.error.message}")
        return text_result(f"{(answer.content or {}).get('name')} asked by {os.getpid()}")
    raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")


server = Server("held", on_list_prompts=list_prompts, on_get_prompt=get_prompt)

if __name__ == "__main__":
    print("held server starting", file=sys.stderr, flush=True)
    run_stdio(server)
