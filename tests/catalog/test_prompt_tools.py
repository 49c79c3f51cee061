"""Prompts as tools, sans I/O and through the service: the definitions each revision receives (checked
against the official schemas), hostile tool input, filters, policy through the tools, and nothing about
tools without the option."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.mounts import Mount
from gateway.catalog.policy import Rules
from gateway.catalog.prompt_tools import (
    MAX_NAMES_IN_SCHEMA,
    ListCall,
    ToolInputError,
    get_result,
    list_result,
    parse_call,
    tool_definitions,
)
from gateway.frontend.hub import Hub
from gateway.frontend.service import SERVER_INFO, PromptService
from gateway.frontend.session import ClientSession
from gateway.protocol.eras import for_client
from gateway.protocol.errors import InvalidParams, MethodNotFound
from gateway.protocol.jsonrpc import Request
from gateway.protocol.meta_keys import TAGS_META_KEY
from gateway.protocol.versions import HANDSHAKE_VERSIONS, MODERN_VERSIONS
from gateway.testing import FakePromptSource
from tests.schema_check import check

pytestmark = pytest.mark.anyio
SUPPORTED_VERSIONS = (*HANDSHAKE_VERSIONS, *MODERN_VERSIONS)


class Tagged(FakePromptSource):
    own_tags = True


def service(*, tools: bool = True, viewer_deny: tuple[str, ...] = ()) -> tuple[PromptService, FakePromptSource]:
    source = Tagged(
        "team",
        [
            {
                "name": "review",
                "title": "Code review",
                "description": "Review a change",
                "_meta": {TAGS_META_KEY: ["eng"]},
            },
            {
                "name": "release-notes",
                "description": "Write release notes",
                "arguments": [{"name": "v", "required": True}],
            },
            {"name": "secret", "description": "hidden by policy"},
        ],
    )
    catalog = Catalog(
        [Mount(source, prefix="team__")],
        codec=CursorCodec(b"k" * 32),
        generation="g",
        policy=Rules(deny=("team__secret",), separator="__"),
    )
    return PromptService(lambda: catalog, completions=lambda: True, hub=Hub(), prompts_as_tools=tools), source


async def ignore(method: str, params: object) -> None:
    pass


async def call(
    svc: PromptService, method: str, params: dict[str, Any] | None = None, viewer: Any = None
) -> dict[str, Any]:
    return await svc.serve(method, params, viewer=viewer, notify=ignore, completions=True, modern=False)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_every_revision_gets_tool_definitions_its_schema_accepts(version: str) -> None:
    result = {"tools": tool_definitions(["a", "b"]), "ttlMs": 0, "cacheScope": "public"}
    shaped = for_client("tools/list", result, version, SERVER_INFO)
    check(version, "ListToolsResult", shaped)
    fields = set(shaped["tools"][0])
    assert ("outputSchema" in fields) == (version >= "2025-06-18")
    assert ("annotations" in fields) == (version >= "2025-03-26")


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_every_revision_gets_tool_results_its_schema_accepts(version: str) -> None:
    audio = {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
    rendered = {
        "description": "d",
        "messages": [
            {"role": "user", "content": audio},
            {"role": "assistant", "content": {"type": "text", "text": "t"}},
        ],
    }
    shaped = for_client("tools/call", {**get_result(rendered), "resultType": "complete"}, version, SERVER_INFO)
    check(version, "CallToolResult", shaped)
    assert ("structuredContent" in shaped) == (version >= "2025-06-18")


def test_the_names_are_in_the_schema_only_while_they_are_few() -> None:
    few = tool_definitions(["a"])[1]["inputSchema"]["properties"]["name"]
    many = tool_definitions([f"p{i}" for i in range(MAX_NAMES_IN_SCHEMA + 1)])[1]["inputSchema"]["properties"]["name"]
    assert few["enum"] == ["a"]
    assert "enum" not in many


_JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["name", "arguments", "_meta", "x"]), _JSON | st.sampled_from(["list_prompts", "get_prompt"])
    )
)
def test_any_tool_call_is_parsed_or_refused_clearly(params: dict[str, Any]) -> None:
    refusal: Exception | None = None
    try:
        parse_call(params)
    except (InvalidParams, ToolInputError) as exc:  # anything else fails the test
        refusal = exc
    if isinstance(refusal, InvalidParams):
        assert refusal.code == -32602
        assert "Unknown tool" in refusal.message
    elif refusal is not None:
        assert str(refusal)


def test_filters_by_text_any_case_and_by_tag() -> None:
    prompts = [
        {"name": "a", "description": "Überprüfe den Code", "_meta": {TAGS_META_KEY: ["eng"]}},
        {"name": "b", "title": "Release NOTES"},
    ]
    assert [p["name"] for p in list_result(prompts, ListCall("überprüfe", None))["structuredContent"]["prompts"]] == [
        "a"
    ]
    assert [p["name"] for p in list_result(prompts, ListCall("notes", None))["structuredContent"]["prompts"]] == ["b"]
    assert [p["name"] for p in list_result(prompts, ListCall(None, "eng"))["structuredContent"]["prompts"]] == ["a"]
    assert list_result(prompts, ListCall(None, None))["structuredContent"]["prompts"][0]["tags"] == ["eng"]


async def test_without_the_option_nothing_about_tools_is_declared_or_served() -> None:
    svc, _ = service(tools=False)
    assert "tools" not in svc.capabilities(completions=True)
    session = ClientSession(svc, on_list_changed=lambda _lists: None)
    await session.handle_request(
        Request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c"}}),
        ignore,
    )
    for method in ("tools/list", "tools/call"):
        with pytest.raises(MethodNotFound):
            await session.handle_request(Request(2, method, {"name": "get_prompt"}), ignore)


async def test_tools_go_through_policy_exactly_as_prompts_do() -> None:
    svc, source = service()
    assert svc.capabilities(completions=False)["tools"] == {"listChanged": True}
    tools = await call(svc, "tools/list")
    assert tools["tools"][1]["inputSchema"]["properties"]["name"]["enum"] == ["team__review", "team__release-notes"]
    listed = await call(svc, "tools/call", {"name": "list_prompts", "arguments": {}})
    assert [p["name"] for p in listed["structuredContent"]["prompts"]] == ["team__review", "team__release-notes"]
    hidden = await call(svc, "tools/call", {"name": "get_prompt", "arguments": {"name": "team__secret"}})
    unknown = await call(svc, "tools/call", {"name": "get_prompt", "arguments": {"name": "team__nothing"}})
    assert hidden["isError"] is True
    assert hidden["content"][0]["text"] == "Unknown prompt: team__secret"  # as for a name that does not exist
    assert unknown["content"][0]["text"] == "Unknown prompt: team__nothing"
    assert source.count("prompts/get") == 0

    viewer = Rules(deny=("team__review",), separator="__")
    tools = await call(svc, "tools/list", viewer=viewer)
    assert tools["tools"][1]["inputSchema"]["properties"]["name"]["enum"] == ["team__release-notes"]
    assert tools["cacheScope"] == "private"
    listed = await call(svc, "tools/call", {"name": "list_prompts"}, viewer=viewer)
    assert [p["name"] for p in listed["structuredContent"]["prompts"]] == ["team__release-notes"]


async def test_a_get_through_the_tool_renders_or_says_what_is_wrong() -> None:
    svc, _ = service()
    got = await call(
        svc, "tools/call", {"name": "get_prompt", "arguments": {"name": "team__release-notes", "arguments": {"v": "2"}}}
    )
    assert got["content"] == [{"type": "text", "text": "team:release-notes:[('v', '2')]"}]
    assert got["structuredContent"]["messages"][0]["role"] == "user"
    missing = await call(svc, "tools/call", {"name": "get_prompt", "arguments": {"name": "team__release-notes"}})
    assert missing["isError"] is True
    assert "Missing required argument for prompt team__release-notes: v" in missing["content"][0]["text"]
    wrong = await call(svc, "tools/call", {"name": "get_prompt", "arguments": {"name": "x", "arguments": {"v": 2}}})
    assert wrong["isError"] is True
    assert "values are all strings" in wrong["content"][0]["text"]
    with pytest.raises(InvalidParams, match="Unknown tool: nope"):
        await call(svc, "tools/call", {"name": "nope"})


@pytest.mark.parametrize(("offered", "asked"), [(True, True), (True, False), (False, True)])
async def test_a_listen_stream_gets_tools_list_changed_only_when_asked_and_offered(offered: bool, asked: bool) -> None:
    svc, _ = service(tools=offered)
    sent: list[tuple[str, Any]] = []
    acknowledged, changed = anyio.Event(), anyio.Event()

    async def notify(method: str, params: Any) -> None:
        sent.append((method, params))
        if method == "notifications/subscriptions/acknowledged":
            acknowledged.set()
        if method == "notifications/prompts/list_changed":
            changed.set()

    listen = Request(
        7, "subscriptions/listen", {"notifications": {"promptsListChanged": True, "toolsListChanged": asked}}
    )
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(svc._listen, listen, notify, None)
            await acknowledged.wait()
            svc._hub.broadcast_list_changed()
            await changed.wait()
            svc._hub.close_subscriptions()
    expected = offered and asked
    assert ("toolsListChanged" in sent[0][1]["notifications"]) == expected
    assert ("notifications/tools/list_changed" in [method for method, _ in sent]) == expected
