"""Why a request failed, in its audit event: the gateway's own words (an unknown prompt and params that
do not validate both answer -32602, and an operator must tell them apart), never an upstream's message,
which may quote an argument's value."""

from __future__ import annotations

import pytest

from gateway.config import AuditSettings
from gateway.identity.audit import AuditTrail
from gateway.protocol.errors import InvalidParams, UnknownPrompt, UpstreamRejected, UpstreamTimeout

GET = {"name": "writing__summarize", "arguments": {"text": "my secret draft"}}


def _failed(error: Exception) -> dict[str, object]:
    trail = AuditTrail(AuditSettings(), keep_recent=5)
    with pytest.raises(type(error)), trail.request(None, "prompts/get", GET, "writing"):
        raise error
    return trail.recent[-1]


def test_the_gateways_own_errors_say_why() -> None:
    unknown = _failed(UnknownPrompt("writing__summarise"))
    invalid = _failed(InvalidParams("Invalid params: params.arguments.text: Input should be a valid string"))
    assert (unknown["code"], unknown["reason"]) == (-32602, "Unknown prompt: writing__summarise")
    assert invalid["code"] == -32602
    assert invalid["reason"] != unknown["reason"]
    assert _failed(UpstreamTimeout("writing", "did not answer within 30 s"))["reason"] == (
        "Upstream 'writing' did not answer within 30 s"
    )


def test_an_upstreams_message_is_not_audited() -> None:
    """Only which upstream answered which code (a code 0 was a bare ``error`` with no why at all)."""
    event = _failed(UpstreamRejected("writing", {"code": -32602, "message": "bad text: 'my secret draft'"}))
    assert event["code"] == -32602
    assert event["reason"] == "Upstream 'writing' answered with error code -32602 (its message is not kept)"
    assert "my secret draft" not in repr(event)
    zero = _failed(UpstreamRejected("fetch", {"code": 0, "message": "Error rendering prompt: 'my secret draft'"}))
    assert (zero["code"], zero["reason"]) == (
        0,
        "Upstream 'fetch' answered with error code 0 (its message is not kept)",
    )
    assert "my secret draft" not in repr(zero)


def test_who_is_anonymous_where_no_credentials_are_asked() -> None:
    """Over HTTP without tokens the front ends carry no identity: the audit says so, typed (it was null)."""
    event = _failed(UnknownPrompt("writing__summarise"))
    assert event["who"] == {"kind": "anonymous", "name": "http"}
