"""The prompts the official conformance suite asks for, by their fixed names; mounted unprefixed."""

from __future__ import annotations

import base64

import mcp.types as t
from mcp import MCPError
from mcp.server.lowlevel.server import Server

from gateway import start_up
from tests.servers.common import run_stdio, text_result

start_up.resume()

PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002000154a24f5d"
        "0000000049454e44ae426082"
    )
).decode()
ARGS = [
    t.PromptArgument(name="arg1", description="First test argument", required=True),
    t.PromptArgument(name="arg2", description="Second test argument", required=True),
]
PROMPTS = [
    t.Prompt(name="test_simple_prompt", description="A simple prompt without arguments"),
    t.Prompt(name="test_prompt_with_arguments", description="A prompt with arguments", arguments=ARGS),
    t.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt with an embedded resource",
        arguments=[t.PromptArgument(name="resourceUri", description="URI of the resource", required=True)],
    ),
    t.Prompt(name="test_prompt_with_image", description="A prompt with image content"),
    t.Prompt(name="test_input_required_result_prompt", description="Asks for context first (2026-07-28 MRTR)"),
]
ASK_CONTEXT = t.ElicitRequest(
    params=t.ElicitRequestFormParams(
        message="Please provide context for this prompt",
        requested_schema={"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]},
    )
)


async def list_prompts(ctx: object, params: t.PaginatedRequestParams | None) -> t.ListPromptsResult:
    return t.ListPromptsResult(prompts=PROMPTS)


async def get_prompt(ctx: object, params: t.GetPromptRequestParams) -> t.GetPromptResult | t.InputRequiredResult:
    args = params.arguments or {}
    if params.name == "test_input_required_result_prompt":
        answer = (params.input_responses or {}).get("context")
        if answer is None:
            return t.InputRequiredResult(input_requests={"context": ASK_CONTEXT}, request_state="context-requested")
        given = answer.model_dump(by_alias=True).get("content") or {}
        return text_result(f"Prompt rendered with context: {given.get('context')}")
    if params.name == "test_simple_prompt":
        return text_result("This is a simple prompt for testing.")
    if params.name == "test_prompt_with_arguments":
        return text_result(f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'")
    if params.name == "test_prompt_with_embedded_resource":
        resource = t.TextResourceContents(
            uri=args["resourceUri"], mime_type="text/plain", text="Embedded resource content for testing."
        )
        return t.GetPromptResult(
            messages=[
                t.PromptMessage(role="user", content=t.EmbeddedResource(type="resource", resource=resource)),
                t.PromptMessage(
                    role="user", content=t.TextContent(type="text", text="Please process the resource above.")
                ),
            ]
        )
    if params.name == "test_prompt_with_image":
        return t.GetPromptResult(
            messages=[
                t.PromptMessage(role="user", content=t.ImageContent(type="image", data=PNG, mime_type="image/png")),
                t.PromptMessage(
                    role="user", content=t.TextContent(type="text", text="Please analyze the image above.")
                ),
            ]
        )
    raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")


async def complete(ctx: object, params: t.CompleteRequestParams) -> t.CompleteResult:
    values = [v for v in ("testValue1", "testing", "other") if v.startswith(params.argument.value)]
    return t.CompleteResult(completion=t.Completion(values=values, total=len(values), has_more=False))


server = Server("conformance-prompts", on_list_prompts=list_prompts, on_get_prompt=get_prompt, on_completion=complete)

if __name__ == "__main__":
    run_stdio(server)
