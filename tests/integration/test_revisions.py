"""Official SDK clients offering each handshake revision (the SDK has no public switch for this, so the
constant it offers is patched); the SDK then validates every answer against that revision's schema."""

from __future__ import annotations

from pathlib import Path

import mcp.client.session
import mcp.types as t
import pytest
from mcp import Client

from tests.integration.helpers import demo_upstream, gateway_params, sdk_upstream, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_sdk_client_pinned_to_each_revision(
    tmp_path: Path, revision: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", revision)
    config = write_config(
        tmp_path / "c.toml", [demo_upstream("writing", "writing"), sdk_upstream("comp", "completing")]
    )
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        assert client.protocol_version == revision
        names = [p.name for p in (await client.list_prompts()).prompts]
        assert names[:3] == ["writing__summarize", "writing__translate", "writing__proofread"]
        result = await client.get_prompt("writing__summarize", {"text": "x"})
        assert isinstance(result.messages[0].content, t.TextContent)
        completion = await client.complete(
            t.PromptReference(type="ref/prompt", name="comp__weather"), {"name": "country", "value": "F"}
        )
        assert completion.completion.values == ["FR"]
