"""Prompts only the newer revisions can express: audio and resource_link content, and a prompt that
asks the client for input first (a 2026-07-28 multi round-trip request: InputRequiredResult)."""

from __future__ import annotations

import base64
import json

import mcp.types as t
from mcp import MCPError
from mcp.server.lowlevel.server import Server

from gateway import start_up
from tests.servers.common import run_stdio, text_result

start_up.resume()

WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()
PROMPTS = [
    t.Prompt(name="voice", title="A voice note", description="audio and a resource link"),
    t.Prompt(name="greet", description="asks who you are (elicitation) before it greets you"),
]
ASK = t.ElicitRequest(
    params=t.ElicitRequestFormParams(
        message="Who are you?",
        requested_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
)


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    return t.ListPromptsResult(prompts=PROMPTS, ttl_ms=30_000, cache_scope="public")


async def get_prompt(ctx: object, params: t.GetPromptRequestParams) -> t.GetPromptResult | t.InputRequiredResult:
    if params.name == "voice":
        link = t.ResourceLink(
            type="resource_link", uri="file:///notes/today.md", name="today", mime_type="text/markdown"
        )
        return t.GetPromptResult(
            messages=[
                t.PromptMessage(role="user", content=t.AudioContent(type="audio", data=WAV, mime_type="audio/wav")),
                t.PromptMessage(role="user", content=link),
            ]
        )
    if params.name == "greet":
        answer = (params.input_responses or {}).get("who")
        if answer is None:
            return t.InputRequiredResult(input_requests={"who": ASK}, request_state="asked-once")
        content = json.loads(answer.model_dump_json(by_alias=True)).get("content") or {}
        return text_result(f"Hello, {content.get('name')} (state {params.request_state})")
    raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")


server = Server("rich", on_list_prompts=list_prompts, on_get_prompt=get_prompt)

if __name__ == "__main__":
    run_stdio(server)
