"""Skills through one gateway process over HTTP, as a team runs it: its own skill folder beside three
relayed SDK upstreams (one whose skills change, one whose files are tampered with, one that serves skills
alone, without prompts; all 2026-07-28, the era in which the SDK declares extensions), traced to a real
OTLP endpoint. One process for every check, so the suite pays its start once:

* spans as the OpenTelemetry conventions for MCP have them, for each skill method and each relayed
  request, a digest mismatch with its own ``error.type``;
* a server of skills alone accepted and relayed;
* relayed manifests cached (the upstream counts what it is asked), until the upstream announces a change;
* an upstream's own ``notifications/resources/list_changed`` passed on, and an edited skill file
  announced, on a Streamable HTTP session's GET stream and on a 2026-07-28 listen stream."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import anyio
import mcp.types as t
import pytest
from mcp import Client, MCPError
from mcp.client.subscriptions import ResourcesListChanged, Subscription

from tests.integration.helpers import ListChangedWatcher, running_gateway, sdk_upstream, write_config
from tests.integration.otlp import Collector, ReceivedSpan, otlp_collector
from tests.integration.test_skills import call, files_upstream, read_back, skills_folder

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
EXPORT_SOON = {"OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_METRIC_EXPORT_INTERVAL": "200"}
A_INVOICE = "skill://a/pdf-processing/templates/invoice.md"
BAD_INVOICE = "skill://bad/pdf-processing/templates/invoice.md"
REASON = "Upstream 'bad' served bytes that do not match the skill's manifest"


def relayed(namespace: str, **extra: Any) -> dict[str, Any]:
    env = extra.pop("env", {})
    return sdk_upstream(namespace, "skills_upstream", relay_skills=True, env=env, **extra)


class Traced:
    """Requests each in a trace of its own (``traceparent`` in ``_meta``), so that a test finds the
    SERVER span a request made, and the CLIENT spans under it."""

    def __init__(self, client: Client, collector: Collector) -> None:
        self.client, self.collector, self._count = client, collector, 0

    async def call(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any] | MCPError, str]:
        self._count += 1
        trace_id = f"{self._count:032x}"
        meta = {"traceparent": f"00-{trace_id}-{'c' * 16}-01"}
        try:
            return await call(self.client, method, {**params, "_meta": meta}), trace_id
        except MCPError as exc:
            return exc, trace_id

    async def spans(self, trace_id: str, *, clients: int) -> tuple[ReceivedSpan, list[ReceivedSpan]]:
        def found(c: Collector) -> tuple[ReceivedSpan, list[ReceivedSpan]] | None:
            server = next((s for s in c.spans if s.trace_id == trace_id and s.kind_name == "SERVER"), None)
            if server is None:
                return None
            under = [s for s in c.spans if s.parent_span_id == server.span_id and s.kind_name == "CLIENT"]
            return (server, under) if len(under) >= clients else None

        server, under = await self.collector.wait_for(found)
        assert server.parent_span_id == "c" * 16
        return server, under


async def spans_of_every_skill_method(traced: Traced) -> None:
    listing, trace_id = await traced.call("skills/list", {})
    assert not isinstance(listing, MCPError)
    server, under = await traced.spans(trace_id, clients=6)  # every relaying upstream, its two pages
    assert (server.name, server.attributes["mcp.method.name"]) == ("skills/list", "skills/list")
    assert "mcp.resource.uri" not in server.attributes
    assert {s.attributes["prompt_gateway.upstream"] for s in under} == {"a", "bad", "lean"}
    assert {(s.name, s.attributes["mcp.method.name"]) for s in under} == {("skills/list", "skills/list")}

    for method, uri in [
        ("skills/get", "skill://a/pdf-processing/SKILL.md"),
        ("resources/directory/read", "skill://team/pdf-processing"),
        ("resources/read", "skill://team/pdf-processing/SKILL.md"),
    ]:
        answer, trace_id = await traced.call(method, {"uri": uri})
        assert not isinstance(answer, MCPError), answer
        server, _ = await traced.spans(trace_id, clients=0)
        assert server.name == method  # the URI is no part of the name: it is not low-cardinality
        assert (server.attributes["mcp.method.name"], server.attributes["mcp.resource.uri"]) == (method, uri)
        assert isinstance(server.attributes["jsonrpc.request.id"], str)
        assert server.status_code == 0
    for method in ("resources/list", "resources/templates/list"):
        answer, trace_id = await traced.call(method, {})
        assert not isinstance(answer, MCPError), answer
        server, _ = await traced.spans(trace_id, clients=0)
        assert (server.name, server.attributes["mcp.method.name"]) == (method, method)
        assert "mcp.resource.uri" not in server.attributes

    read, trace_id = await traced.call("resources/read", {"uri": A_INVOICE})  # relayed: one CLIENT span
    assert not isinstance(read, MCPError)
    server, under = await traced.spans(trace_id, clients=1)
    assert server.attributes["mcp.resource.uri"] == A_INVOICE
    (upstream,) = [s for s in under if s.name == "resources/read"]
    assert upstream.attributes["mcp.resource.uri"] == "skill://pdf-processing/templates/invoice.md"  # its own URI
    assert upstream.attributes["prompt_gateway.upstream"] == "a"
    assert upstream.attributes["network.transport"] == "pipe"
    assert "error.type" not in upstream.attributes

    refused, trace_id = await traced.call("resources/read", {"uri": BAD_INVOICE})
    assert isinstance(refused, MCPError)
    assert refused.error.code == -32603
    server, under = await traced.spans(trace_id, clients=1)
    assert (server.attributes["error.type"], server.attributes["rpc.response.status_code"]) == ("-32603", "-32603")
    assert (server.status_code, server.status_message) == (2, REASON)
    mismatched = [s for s in under if s.name == "resources/read"]
    assert mismatched, under
    for span in mismatched:  # the upstream answered: not an error code of its, but bytes not its manifest's
        assert span.attributes["error.type"] == "digest_mismatch"
        assert "rpc.response.status_code" not in span.attributes
        assert (span.status_code, span.status_message) == (2, REASON)


async def a_server_of_skills_alone_is_relayed(client: Client) -> None:
    listing = await call(client, "skills/list", {})
    lean = [s for s in listing["skills"] if s["uri"].startswith("skill://lean/")]
    assert [s["uri"] for s in lean] == [
        "skill://lean/acme/billing/refunds/SKILL.md",
        "skill://lean/pdf-processing/SKILL.md",
    ]
    for entry in lean:
        for file in entry["resources"]:
            data = await read_back(client, file["uri"])
            assert (len(data), "sha256:" + hashlib.sha256(data).hexdigest()) == (file["size"], file["digest"])
    names = {p.name for p in (await client.list_prompts()).prompts}
    assert "a__hello" in names
    assert not any(name.startswith("lean__") for name in names)


async def received_by(client: Client, namespace: str) -> dict[str, int]:
    result = await client.get_prompt(f"{namespace}__requests")
    content = result.messages[0].content
    assert isinstance(content, t.TextContent)
    return json.loads(content.text)  # type: ignore[no-any-return]


async def manifests_are_cached(client: Client) -> None:
    await call(client, "skills/get", {"uri": "skill://a/pdf-processing/SKILL.md"})
    before = await received_by(client, "a")
    for _ in range(3):
        await call(client, "skills/get", {"uri": "skill://a/pdf-processing/SKILL.md"})
        await call(client, "skills/list", {})
        await call(client, "resources/directory/read", {"uri": "skill://a/pdf-processing"})
    after = await received_by(client, "a")
    assert after["skills/list"] == before["skills/list"], (before, after)  # held, not asked for again
    assert after.get("skills/get", 0) == before.get("skills/get", 0)


async def next_resources_change(subscription: Subscription) -> None:
    with anyio.fail_after(20):
        async for event in subscription:
            if isinstance(event, ResourcesListChanged):
                return


async def an_upstreams_change_is_relayed(
    client: Client, legacy: ListChangedWatcher, subscription: Subscription
) -> None:
    """The upstream changes its skills and says so: the gateway asks it again (once), and tells its
    clients, a session and a listen stream both."""
    before = await received_by(client, "a")
    await client.get_prompt("a__change-skills")
    await legacy.wait()
    await next_resources_change(subscription)
    listing = await call(client, "skills/list", {})
    assert "skill://a/onboarding/SKILL.md" in [s["uri"] for s in listing["skills"]]
    await call(client, "skills/get", {"uri": "skill://a/pdf-processing/SKILL.md"})
    after = await received_by(client, "a")
    assert after["skills/list"] == before["skills/list"] + 3  # asked again once (a page a skill): then held
    pdf = next(s for s in listing["skills"] if s["uri"] == "skill://a/pdf-processing/SKILL.md")
    invoice = next(r for r in pdf["resources"] if r["uri"] == A_INVOICE)
    second = b"Invoice template, second edition\n"
    assert invoice["digest"] == "sha256:" + hashlib.sha256(second).hexdigest()
    assert await read_back(client, A_INVOICE) == second


async def test_skills_over_http_traced_relayed_cached_and_announced(tmp_path: Path) -> None:
    root = skills_folder(tmp_path / "repo")
    upstreams = [
        files_upstream(root, "both"),
        relayed("a"),  # protocol "auto": the SDK server speaks 2026-07-28, changes come on a listen stream
        relayed("bad", env={"SKILLS_TAMPERED": "1"}),
        relayed("lean", env={"SKILLS_NO_PROMPTS": "1"}),
    ]
    async with otlp_collector() as collector:
        telemetry = {"enabled": True, "endpoint": collector.url, "metrics": False}
        config = write_config(
            tmp_path / "g.toml", upstreams, server={"transport": "http", "port": 0}, telemetry=telemetry
        )
        legacy = ListChangedWatcher(t.ResourceListChangedNotification)
        async with (
            running_gateway(config, env=EXPORT_SOON) as gateway,
            Client(f"{gateway.url}/mcp", mode="legacy", cache=None, message_handler=legacy) as session,
            Client(f"{gateway.url}/mcp", cache=None) as modern,
        ):
            assert modern.protocol_version == "2026-07-28"
            await spans_of_every_skill_method(Traced(session, collector))
            await a_server_of_skills_alone_is_relayed(session)
            await manifests_are_cached(session)
            async with modern.listen(resources_list_changed=True) as subscription:
                assert subscription.honored.resources_list_changed is True
                await an_upstreams_change_is_relayed(session, legacy, subscription)

                edited = root / ".claude/skills/pdf-processing/templates/invoice.md"
                await anyio.Path(edited).write_text("Invoice v4\n")  # the team's own file: announced both ways
                await legacy.wait()
                await next_resources_change(subscription)
                assert await read_back(modern, "skill://team/pdf-processing/templates/invoice.md") == b"Invoice v4\n"
