"""Results reshaped for each revision, judged by that revision's official JSON Schema."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.protocol.eras import AUDIO_URI_PREFIX, for_client
from gateway.protocol.modern import SERVER_INFO_KEY
from gateway.protocol.versions import ALL_VERSIONS, HANDSHAKE_VERSIONS
from tests.schema_check import check

GATEWAY = {"name": "mcp-prompt-gateway", "version": "0"}
WAV = base64.b64encode(b"RIFF....WAVE").decode()
PNG = base64.b64encode(b"\x89PNG....").decode()

annotations = st.fixed_dictionaries(
    {}, optional={"audience": st.just(["user"]), "priority": st.sampled_from([0, 0.5, 1])}
)
text = st.builds(
    lambda t, a: {"type": "text", "text": t, **a},
    st.text(max_size=20),
    st.just({}) | annotations.map(lambda a: {"annotations": a}),
)
image = st.just({"type": "image", "data": PNG, "mimeType": "image/png"})
audio = st.builds(
    lambda a: {"type": "audio", "data": WAV, "mimeType": "audio/wav", **a},
    st.just({}) | annotations.map(lambda a: {"annotations": a}),
)
embedded = st.sampled_from(
    [
        {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hi"}},
        {"type": "resource", "resource": {"uri": "file:///a.bin", "blob": WAV}},
    ]
)
link = st.builds(
    lambda extra: {"type": "resource_link", "uri": "file:///notes.md", "name": "notes", **extra},
    st.fixed_dictionaries(
        {}, optional={"title": st.just("Notes"), "mimeType": st.just("text/markdown"), "description": st.just("d")}
    ),
)
content = text | image | audio | embedded | link
messages = st.lists(
    st.builds(lambda r, c: {"role": r, "content": c}, st.sampled_from(["user", "assistant"]), content), max_size=6
)


def modern_get_result(msgs: list[dict[str, Any]]) -> dict[str, Any]:
    """As a 2026-07-28 upstream answers (with its own identity in _meta)."""
    return {
        "resultType": "complete",
        "description": "d",
        "messages": msgs,
        "_meta": {SERVER_INFO_KEY: {"name": "up", "version": "9"}},
    }


@settings(max_examples=60, deadline=None)
@given(messages)
def test_every_revision_gets_a_prompt_its_own_schema_accepts(msgs: list[dict[str, Any]]) -> None:
    for version in ALL_VERSIONS:
        out = for_client("prompts/get", modern_get_result(msgs), version, GATEWAY)
        check(version, "GetPromptResult", out)
        assert len(out["messages"]) == len(msgs)  # rewritten, never dropped


def test_audio_becomes_a_lossless_blob_resource_only_where_audio_is_unknown() -> None:
    block = {"type": "audio", "data": WAV, "mimeType": "audio/wav", "annotations": {"priority": 1}}
    result = modern_get_result([{"role": "user", "content": block}])
    old = for_client("prompts/get", result, "2024-11-05", GATEWAY)["messages"][0]["content"]
    assert old == {
        "type": "resource",
        "resource": {"uri": f"{AUDIO_URI_PREFIX}0", "mimeType": "audio/wav", "blob": WAV},
        "annotations": {"priority": 1},
    }
    for version in ALL_VERSIONS[1:]:
        assert for_client("prompts/get", result, version, GATEWAY)["messages"][0]["content"] == block


def test_resource_link_becomes_text_naming_it_before_2025_06_18() -> None:
    block = {
        "type": "resource_link",
        "uri": "file:///r.md",
        "name": "r",
        "title": "Readme",
        "mimeType": "text/markdown",
    }
    result = modern_get_result([{"role": "user", "content": block}])
    for version in ("2024-11-05", "2025-03-26"):
        assert for_client("prompts/get", result, version, GATEWAY)["messages"][0]["content"] == {
            "type": "text",
            "text": "Resource link: Readme <file:///r.md> (text/markdown)",
        }
    for version in ("2025-06-18", "2025-11-25", "2026-07-28"):
        assert for_client("prompts/get", result, version, GATEWAY)["messages"][0]["content"] == block


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_handshake_clients_get_no_modern_only_fields(version: str) -> None:
    listing = {
        "prompts": [{"name": "a__p", "title": "P", "icons": [{"src": "https://x/i.png"}]}],
        "nextCursor": "c",
        "ttlMs": 5,
        "cacheScope": "public",
        "_meta": {SERVER_INFO_KEY: {"name": "up", "version": "1"}, "prompt-gateway/unavailable": ["b"]},
    }
    out = for_client("prompts/list", listing, version, GATEWAY)
    assert out == {
        "prompts": listing["prompts"],
        "nextCursor": "c",
        "_meta": {"prompt-gateway/unavailable": ["b"]},
    }
    check(version, "ListPromptsResult", out)


def test_modern_clients_get_result_type_and_the_gateway_identity() -> None:
    listing = {"prompts": [], "ttlMs": 0, "cacheScope": "private"}
    out = for_client("prompts/list", listing, "2026-07-28", GATEWAY)
    assert out["resultType"] == "complete"
    assert out["_meta"] == {SERVER_INFO_KEY: GATEWAY}
    check("2026-07-28", "ListPromptsResult", out)
    relayed = for_client("prompts/get", modern_get_result([]), "2026-07-28", GATEWAY)
    assert relayed["_meta"][SERVER_INFO_KEY] == GATEWAY  # the upstream's identity is not the server the client sees
    waiting = {"resultType": "input_required", "requestState": "s"}
    assert for_client("prompts/get", waiting, "2026-07-28", GATEWAY)["resultType"] == "input_required"
