"""Many prompts in small pages (PROMPT_COUNT, PAGE_SIZE), plus one prompt carrying every field and
content type, so that pass-through of all of them is checked end to end."""

from __future__ import annotations

import base64
import os

import mcp.types as t
from mcp import MCPError
from mcp.server.lowlevel.server import Server

from gateway import start_up
from tests.servers.common import run_stdio, text_result

start_up.resume()

COUNT = int(os.environ.get("PROMPT_COUNT", "1000"))
PAGE = int(os.environ.get("PAGE_SIZE", "7"))
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
WAV = base64.b64encode(b"RIFF....WAVEfmt ").decode()

RICH = t.Prompt(
    name="rich",
    title="A prompt with everything",
    description="Carries title, icons, _meta and arguments",
    arguments=[t.PromptArgument(name="topic", description="What about", required=True)],
    icons=[t.Icon(src="https://example.invalid/icon.png", mime_type="image/png")],
    _meta={"example.com/owner": "team-a"},
)
PROMPTS = [RICH] + [t.Prompt(name=f"p{i:04d}", description=f"prompt {i}") for i in range(COUNT - 1)]


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    cursor = params.cursor if params else None
    try:
        start = int(cursor) if cursor is not None else 0
    except ValueError:
        raise MCPError(code=-32602, message="Invalid cursor") from None
    end = start + PAGE
    return t.ListPromptsResult(prompts=PROMPTS[start:end], next_cursor=str(end) if end < len(PROMPTS) else None)


async def get_prompt(ctx: object, params: t.GetPromptRequestParams) -> t.GetPromptResult:
    if params.name == "rich":
        topic = (params.arguments or {}).get("topic", "")
        annotations = t.Annotations(audience=["user"], priority=0.5)
        return t.GetPromptResult(
            description=f"everything about {topic}",
            _meta={"example.com/trace": "abc"},
            messages=[
                t.PromptMessage(
                    role="user",
                    content=t.TextContent(type="text", text=f"Tell me about {topic}", annotations=annotations),
                ),
                t.PromptMessage(
                    role="assistant", content=t.ImageContent(type="image", data=PNG, mime_type="image/png")
                ),
                t.PromptMessage(role="user", content=t.AudioContent(type="audio", data=WAV, mime_type="audio/wav")),
                t.PromptMessage(
                    role="user",
                    content=t.EmbeddedResource(
                        type="resource",
                        resource=t.TextResourceContents(
                            uri="file:///notes.md", mime_type="text/markdown", text="# Notes"
                        ),
                    ),
                ),
                t.PromptMessage(
                    role="user",
                    content=t.ResourceLink(
                        type="resource_link",
                        uri="file:///big.bin",
                        name="big.bin",
                        mime_type="application/octet-stream",
                    ),
                ),
            ],
        )
    if params.name.startswith("p") and params.name[1:].isdigit() and int(params.name[1:]) < COUNT - 1:
        return text_result(f"this is {params.name}")
    raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")


server = Server("paginated", on_list_prompts=list_prompts, on_get_prompt=get_prompt)

if __name__ == "__main__":
    run_stdio(server)
