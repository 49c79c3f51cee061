"""The 2026-07-28 envelope and header mirroring (sans I/O)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gateway.protocol.errors import HeaderMismatch, InvalidParams, UnsupportedVersion
from gateway.protocol.modern import (
    _HEADER_SAFE,
    _SENTINEL,
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    PROTOCOL_VERSION_KEY,
    _plain,
    carries_envelope,
    check_headers,
    check_version,
    decode_header_value,
    encode_header_value,
    read_envelope,
    request_headers,
    with_envelope,
    without_envelope,
)

ENVELOPE = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}}


def test_the_version_key_alone_makes_a_request_modern() -> None:
    assert carries_envelope({"_meta": {PROTOCOL_VERSION_KEY: 3}})
    assert not carries_envelope({"_meta": {"progressToken": 1}})
    assert not carries_envelope(None)
    assert not carries_envelope({"_meta": "x"})


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        (None, "_meta must be an object"),
        ({"_meta": []}, "_meta must be an object"),
        ({"_meta": {PROTOCOL_VERSION_KEY: "2026-07-28"}}, f"missing {CLIENT_CAPABILITIES_KEY}"),
        ({"_meta": {CLIENT_CAPABILITIES_KEY: {}}}, f"missing {PROTOCOL_VERSION_KEY}"),
        ({"_meta": {**ENVELOPE, PROTOCOL_VERSION_KEY: 20260728}}, "must be a string"),
        ({"_meta": {**ENVELOPE, CLIENT_CAPABILITIES_KEY: []}}, "must be an object"),
        ({"_meta": {**ENVELOPE, CLIENT_INFO_KEY: [1]}}, f"_meta.{CLIENT_INFO_KEY} must be an object"),  # was served
        ({"_meta": {**ENVELOPE, "progressToken": [1]}}, "progressToken must be a string or an integer"),
    ],
)
def test_a_malformed_envelope_is_invalid_params_naming_the_key(params: object, reason: str) -> None:
    with pytest.raises(InvalidParams, match=reason) as caught:
        read_envelope(params)  # type: ignore[arg-type]
    assert caught.value.code == -32602


def test_an_unsupported_version_lists_what_we_speak() -> None:
    envelope = read_envelope({"_meta": {**ENVELOPE, PROTOCOL_VERSION_KEY: "2099-01-01"}})
    with pytest.raises(UnsupportedVersion) as caught:
        check_version(envelope)
    error = caught.value.to_error_object()
    assert error["code"] == -32022
    assert error["data"]["requested"] == "2099-01-01"
    assert error["data"]["supported"][0] == "2026-07-28"
    assert error["data"]["supported"] == ["2026-07-28"]  # as server/discover lists them
    check_version(read_envelope({"_meta": ENVELOPE}))  # ours: no error


def headers(**values: str) -> dict[str, str]:
    return {k.replace("_", "-"): v for k, v in values.items()}


def test_headers_must_mirror_the_body() -> None:
    params = {"name": "a__b", "_meta": ENVELOPE}
    good = headers(mcp_protocol_version="2026-07-28", mcp_method="prompts/get", mcp_name="a__b")
    check_headers(good, "prompts/get", params, "2026-07-28")
    check_headers({**good, "mcp-name": encode_header_value("a__b")}, "prompts/get", params, "2026-07-28")
    cases = {
        "MCP-Protocol-Version header is required": {k: v for k, v in good.items() if k != "mcp-protocol-version"},
        "does not match _meta version": {**good, "mcp-protocol-version": "2025-11-25"},
        "Mcp-Method header is required": {k: v for k, v in good.items() if k != "mcp-method"},
        "Mcp-Method header 'prompts/list'": {**good, "mcp-method": "prompts/list"},
        "Mcp-Name header is required": {k: v for k, v in good.items() if k != "mcp-name"},
        "'a__c' does not match params.name": {**good, "mcp-name": "a__c"},
        "not a valid header value": {**good, "mcp-name": "=?base64?***?="},
    }
    for reason, bad in cases.items():
        with pytest.raises(HeaderMismatch, match=reason) as caught:
            check_headers(bad, "prompts/get", params, "2026-07-28")
        assert caught.value.code == -32020
    # Only name-bearing methods need Mcp-Name.
    check_headers(
        headers(mcp_protocol_version="2026-07-28", mcp_method="prompts/list"), "prompts/list", {}, "2026-07-28"
    )


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)) | st.text())
@example("=?base64?")
@example("a b")
@example(" a")
@example("")
def test_plain_header_values_are_found_as_the_patterns_find_them(value: str) -> None:
    """The string-method fast path takes only what the patterns take as plain (else they decide)."""
    if _plain(value):
        assert _HEADER_SAFE.match(value)
        assert not _SENTINEL.match(value)
        assert encode_header_value(value) == value == decode_header_value(value)


@given(st.text())
@example("0\n")  # Python's ``$`` matches before a final newline: a trailing LF once passed as header-safe
def test_any_value_survives_header_encoding_and_comes_out_header_safe(value: str) -> None:
    encoded = encode_header_value(value)
    assert decode_header_value(encoded) == value
    assert all(0x20 <= ord(c) <= 0x7E for c in encoded)
    assert encoded == encoded.strip() or encoded == ""


def test_header_encoding_follows_the_spec_examples() -> None:
    assert encode_header_value("us-west1") == "us-west1"
    assert encode_header_value("Hello, 世界") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert encode_header_value(" padded ") == "=?base64?IHBhZGRlZCA=?="
    assert encode_header_value("line1\nline2") == "=?base64?bGluZTEKbGluZTI=?="
    assert encode_header_value("=?base64?literal?=") == "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="


def test_request_headers_for_an_upstream() -> None:
    assert request_headers("prompts/get", {"name": "é"}, "2026-07-28") == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "prompts/get",
        "Mcp-Name": "=?base64?w6k=?=",
    }
    assert "Mcp-Name" not in request_headers("prompts/list", {"cursor": "c"}, "2026-07-28")


def test_envelopes_are_rewritten_for_the_server_era() -> None:
    client = {"name": "p", "_meta": {**ENVELOPE, "progressToken": 7, CLIENT_INFO_KEY: {"name": "client"}}}
    assert without_envelope(client) == {"name": "p", "_meta": {"progressToken": 7}}
    assert without_envelope({"name": "p", "_meta": ENVELOPE}) == {"name": "p"}
    assert without_envelope(None) is None
    ours = with_envelope(
        {"name": "p", "_meta": {**client["_meta"], CLIENT_CAPABILITIES_KEY: {"elicitation": {}}}},
        version="2026-07-28",
        client_info={"name": "gw", "version": "1"},
    )
    assert ours["_meta"] == {
        "progressToken": 7,
        PROTOCOL_VERSION_KEY: "2026-07-28",
        CLIENT_CAPABILITIES_KEY: {"elicitation": {}},  # the client's: its multi round-trip answers pass through us
        CLIENT_INFO_KEY: {"name": "gw", "version": "1"},  # ours: the upstream talks to the gateway
    }
    assert with_envelope(None, version="2026-07-28", client_info={})["_meta"][CLIENT_CAPABILITIES_KEY] == {}


def test_a_value_with_a_trailing_line_break_is_not_a_header_value() -> None:
    assert decode_header_value("abc\n") is None
    assert decode_header_value("=?base64?YQ==?=\n") is None


def test_a_mismatch_between_long_values_is_cut_and_says_when_the_cut_hides_the_difference() -> None:
    stated, body = "x/" + "a" * 120 + "B", "x/" + "a" * 120 + "C"
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": stated}
    with pytest.raises(HeaderMismatch) as told:
        check_headers(headers, body, {}, "2026-07-28")
    assert len(told.value.message) < 400  # (a 60 KB method came back whole)
    assert told.value.message.endswith("(they differ after their first 100 characters)")
    with pytest.raises(HeaderMismatch) as plain:
        check_headers({**headers, "mcp-method": "prompts/list"}, "prompts/get", {}, "2026-07-28")
    assert "differ after" not in plain.value.message
