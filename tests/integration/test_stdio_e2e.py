"""An official SDK client talks to the gateway over stdio; three official SDK servers sit behind it."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import mcp.types as t
import pytest
from mcp import Client, MCPError

from tests.integration.helpers import ListChangedWatcher, gateway_params, process_gone, sdk_upstream, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path / "gateway.toml",
        [
            sdk_upstream("pag", "paginated", env={"PROMPT_COUNT": "1000", "PAGE_SIZE": "7"}),
            sdk_upstream("comp", "completing", policy={"deny": ["internal_*"]}),
            sdk_upstream("dyn", "dynamic"),
        ],
        # start-up waits for the three SDK upstreams however loaded the machine (the tests read them all)
        gateway={"page_size": 100, "list_changed_debounce_s": 0.05, "startup_wait_s": 30},
        policy={"allow": ["*"], "deny": ["pag__p09*"]},
    )


@pytest.fixture
async def notifications() -> ListChangedWatcher:
    return ListChangedWatcher()


@pytest.fixture
async def client(config: Path, notifications: ListChangedWatcher) -> AsyncIterator[Client]:
    async with Client(gateway_params(config), mode="legacy", cache=None, message_handler=notifications) as client:
        yield client


async def list_everything(client: Client) -> list[t.Prompt]:
    prompts: list[t.Prompt] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await client.list_prompts(cursor=cursor)
        assert isinstance(page, t.ListPromptsResult)  # parsed and validated by mcp.types
        assert len(page.prompts) <= 100
        prompts += page.prompts
        pages += 1
        if page.next_cursor is None:
            return prompts
        cursor = page.next_cursor


async def initialize_declares_prompts_list_changed_and_completions(client: Client) -> None:
    assert client.protocol_version == "2025-11-25"
    capabilities = client.server_capabilities
    assert capabilities.prompts is not None
    assert capabilities.prompts.list_changed is True
    assert capabilities.completions is not None
    assert client.server_info is not None
    assert client.server_info.name == "mcp-prompt-gateway"
    await client.send_ping()


async def every_prompt_is_listed_exactly_once_through_the_composite_cursor(client: Client) -> None:
    names = [p.name for p in await list_everything(client)]
    hidden = {f"pag__p{i:04d}" for i in range(900, 1000)}  # global policy denies pag__p09*
    expected = ({"pag__rich"} | {f"pag__p{i:04d}" for i in range(999)}) - hidden
    expected |= {
        "comp__weather",
        "dyn__pid",
        "dyn__whoami",
        "dyn__add",
        "dyn__storm",
    }  # comp__internal_notes is denied upstream
    assert len(names) == len(set(names)) == len(expected)
    assert set(names) == expected


async def prompt_fields_pass_through_untouched(client: Client) -> None:
    rich = next(p for p in (await client.list_prompts()).prompts if p.name == "pag__rich")
    assert rich.title == "A prompt with everything"
    assert rich.description == "Carries title, icons, _meta and arguments"
    assert rich.icons is not None
    assert str(rich.icons[0].src) == "https://example.invalid/icon.png"
    assert rich.meta == {"example.com/owner": "team-a"}
    assert rich.arguments == [t.PromptArgument(name="topic", description="What about", required=True)]


async def get_passes_every_content_type_through(client: Client) -> None:
    result = await client.get_prompt("pag__rich", {"topic": "otters"})
    assert isinstance(result, t.GetPromptResult)
    assert result.description == "everything about otters"
    assert result.meta == {"example.com/trace": "abc"}
    kinds = [type(m.content) for m in result.messages]
    assert kinds == [t.TextContent, t.ImageContent, t.AudioContent, t.EmbeddedResource, t.ResourceLink]
    text = result.messages[0].content
    assert isinstance(text, t.TextContent)
    assert text.text == "Tell me about otters"
    assert text.annotations == t.Annotations(audience=["user"], priority=0.5)
    image = result.messages[1].content
    assert isinstance(image, t.ImageContent)
    assert image.mime_type == "image/png"
    assert result.messages[1].role == "assistant"
    resource = result.messages[3].content
    assert isinstance(resource, t.EmbeddedResource)
    assert str(resource.resource.uri) == "file:///notes.md"
    link = result.messages[4].content
    assert isinstance(link, t.ResourceLink)
    assert link.name == "big.bin"


async def completion_is_routed_with_its_context(client: Client) -> None:
    ref = t.PromptReference(type="ref/prompt", name="comp__weather")
    result = await client.complete(ref, {"name": "city", "value": "p"}, context_arguments={"country": "FR"})
    assert isinstance(result, t.CompleteResult)
    assert result.completion.values == ["Paris"]
    result = await client.complete(ref, {"name": "country", "value": "u"})
    assert result.completion.values == ["US"]


BAD_GETS: list[tuple[str, dict[str, str] | None, str]] = [
    ("pag__nope", None, "Unknown prompt: pag__nope"),
    ("comp__internal_notes", None, "Unknown prompt: comp__internal_notes"),  # denied upstream: same answer
    ("pag__p0950", None, "Unknown prompt: pag__p0950"),  # denied globally
    ("COMP__weather", None, "Unknown prompt: COMP__weather"),
    ("comp__weather", {"country": "FR"}, "Missing required argument for prompt comp__weather: city"),
]


async def bad_gets_are_invalid_params(client: Client) -> None:
    for name, arguments, message in BAD_GETS:
        with pytest.raises(MCPError) as info:
            await client.get_prompt(name, arguments)
        assert info.value.error.code == -32602
        assert info.value.error.message == message


async def forged_cursor_is_invalid_params(client: Client) -> None:
    page = await client.list_prompts()
    assert page.next_cursor is not None
    with pytest.raises(MCPError) as info:
        await client.list_prompts(
            cursor=page.next_cursor[:-2] + ("AA" if not page.next_cursor.endswith("AA") else "BB")
        )
    assert (info.value.error.code, info.value.error.message) == (-32602, "Invalid cursor")


async def list_changed_reaches_the_client_and_the_new_prompt_is_listed(
    client: Client, notifications: ListChangedWatcher
) -> None:
    assert "dyn__fresh" not in [p.name for p in await list_everything(client)]
    await client.get_prompt("dyn__add", {"name": "fresh"})
    await notifications.wait(10)
    assert "dyn__fresh" in [p.name for p in await list_everything(client)]
    result = await client.get_prompt("dyn__fresh")
    assert result.messages[0].content == t.TextContent(type="text", text="this is fresh")


async def test_list_changed_reaches_the_client_and_a_burst_of_it_is_debounced(
    client: Client, notifications: ListChangedWatcher
) -> None:
    await list_changed_reaches_the_client_and_the_new_prompt_is_listed(client, notifications)
    notifications.count = 0  # that change was awaited: what follows is the burst's alone
    await client.get_prompt("dyn__storm", {"count": "100"})
    await notifications.wait(10)
    # One more change after the burst: once it has arrived, every broadcast the burst caused has too.
    await client.get_prompt("dyn__add", {"name": "after_storm"})
    while "dyn__after_storm" not in [p.name for p in await list_everything(client)]:
        await notifications.wait(10)
    await notifications.wait(10)
    assert 2 <= notifications.count <= 6


async def test_upstreams_end_with_the_gateway(config: Path) -> None:
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        result = await client.get_prompt("dyn__pid")
        content = result.messages[0].content
        assert isinstance(content, t.TextContent)
        pid = int(content.text)
        assert not process_gone(pid)
    with anyio.fail_after(10):
        while not process_gone(pid):
            await anyio.sleep(0.05)


async def test_a_crashed_upstream_leaves_the_list_and_comes_back(
    client: Client, notifications: ListChangedWatcher
) -> None:
    content = (await client.get_prompt("dyn__pid")).messages[0].content
    assert isinstance(content, t.TextContent)
    os.kill(int(content.text), signal.SIGKILL)
    await notifications.wait(10)
    names = [p.name for p in await list_everything(client)]  # the restart waits >= 0.25 s of backoff
    assert "dyn__pid" not in names
    assert "comp__weather" in names  # the others are unaffected
    with pytest.raises(MCPError) as info:
        await client.get_prompt("dyn__pid")
    assert info.value.error.code == -32603
    assert "Upstream 'dyn'" in info.value.error.message
    while "dyn__pid" not in [p.name for p in await list_everything(client)]:
        await notifications.wait(10)


@pytest.mark.filterwarnings("ignore:ping is removed as of 2026-07-28")  # we are a handshake-era session
async def test_a_handshake_client_over_stdio_sees_the_whole_catalog(client: Client) -> None:
    """What a client only reads, checked one after another against one gateway (and its three SDK
    upstreams: starting them for each check was a tenth of the suite's CPU)."""
    await initialize_declares_prompts_list_changed_and_completions(client)
    await every_prompt_is_listed_exactly_once_through_the_composite_cursor(client)
    await prompt_fields_pass_through_untouched(client)
    await get_passes_every_content_type_through(client)
    await completion_is_routed_with_its_context(client)
    await bad_gets_are_invalid_params(client)
    await forged_cursor_is_invalid_params(client)
