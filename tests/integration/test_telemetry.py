"""Traces and metrics end to end, as the OpenTelemetry conventions for MCP have them: an SDK client sends
``traceparent`` in ``_meta``, the gateway (a real process) serves it through an upstream that says what
``_meta`` (and HTTP headers) it received, and a real OTLP endpoint decodes what the gateway exported.
One trace, parents right from the client to the upstream, for stdio, Streamable HTTP sessions and
2026-07-28 stateless requests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp.types as t
import pytest
from mcp import Client, MCPError, StdioServerParameters

from tests.integration.helpers import (
    HTTP_HEADERS,
    INITIALIZE,
    ROOT,
    http_upstream,
    running_gateway,
    sdk_upstream,
    write_config,
)
from tests.integration.otlp import Collector, ReceivedSpan, otlp_collector
from tests.integration.services import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN_ID = "00f067aa0ba902b7"
CLIENT_CONTEXT: t.RequestParamsMeta = {  # what an instrumented MCP client puts in _meta
    "traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-01",
    "tracestate": "rojo=00f067aa0ba902b7",
    "baggage": "team=prompts",
}
EXPORT_SOON = {"OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_METRIC_EXPORT_INTERVAL": "200"}
DURATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]

# The conventions' attributes for MCP spans: required, and conditionally required where the condition holds
REQUIRED = {"mcp.method.name"}
FOR_A_PROMPT = {"gen_ai.prompt.name", "jsonrpc.request.id"}
ON_ERROR = {"error.type", "rpc.response.status_code"}


def telemetry(collector: Collector) -> dict[str, Any]:
    return {"enabled": True, "endpoint": collector.url, "metrics_interval_s": 0.2, "service_name": "gw-under-test"}


def upstreams(web_url: str) -> list[dict[str, Any]]:
    return [
        sdk_upstream("pipe", "meta_echo"),
        {"namespace": "web", "transport": "streamable-http", "url": web_url, "timeout_s": 20},
    ]


def received(result: t.GetPromptResult) -> dict[str, Any]:
    content = result.messages[0].content
    assert isinstance(content, t.TextContent)
    return json.loads(content.text)  # type: ignore[no-any-return]


def traceparent_parts(value: str) -> tuple[str, str]:
    version, trace_id, span_id, flags = value.split("-")
    assert (version, flags) == ("00", "01")
    return trace_id, span_id


def check_conventions(span: ReceivedSpan, *, kind: str, method: str, prompt: str, transport: str) -> None:
    assert span.kind_name == kind
    assert span.name == f"{method} {prompt}"
    assert span.attributes.keys() >= REQUIRED | FOR_A_PROMPT, span.attributes
    assert span.attributes["mcp.method.name"] == method
    assert span.attributes["gen_ai.prompt.name"] == prompt
    assert span.attributes["network.transport"] == transport
    assert not ON_ERROR & span.attributes.keys()  # set if and only if it failed
    assert span.status_code == 0  # UNSET
    assert span.service == "gw-under-test"
    assert not any("token" in key or "argument" in key for key in span.attributes)


async def follow_one_get(collector: Collector, result: t.GetPromptResult, *, front: str, local: str) -> ReceivedSpan:
    """The SERVER span of the get and the CLIENT span to the upstream: one trace, each the parent of the
    next, the upstream's ``_meta`` carrying the CLIENT span's context (and tracestate, baggage)."""
    carried = received(result)
    upstream_trace, upstream_parent = traceparent_parts(carried["meta"]["traceparent"])
    assert upstream_trace == TRACE_ID
    assert carried["meta"]["tracestate"] == CLIENT_CONTEXT["tracestate"]
    assert carried["meta"]["baggage"] == CLIENT_CONTEXT["baggage"]

    def both(c: Collector) -> tuple[ReceivedSpan, ReceivedSpan] | None:
        server = next(
            (
                s
                for s in c.spans
                if s.kind_name == "SERVER"
                and s.attributes.get("gen_ai.prompt.name") == front
                and s.trace_id == TRACE_ID
            ),
            None,
        )
        client = next((s for s in c.spans if s.span_id == upstream_parent), None)
        return (server, client) if server and client else None

    server, client = await collector.wait_for(both)
    assert server.parent_span_id == CLIENT_SPAN_ID
    assert client.trace_id == TRACE_ID
    assert client.parent_span_id == server.span_id
    check_conventions(
        client, kind="CLIENT", method="prompts/get", prompt=local, transport=client.attributes["network.transport"]
    )
    return server


async def the_other_upstream(collector: Collector, client: Client, front: str) -> ReceivedSpan:
    """The HTTP upstream: its CLIENT span names its address; the context goes as HTTP headers too."""
    result = await client.get_prompt(front, meta=CLIENT_CONTEXT)
    carried = received(result)
    assert carried["headers"]["traceparent"] == carried["meta"]["traceparent"]
    _, parent = traceparent_parts(carried["meta"]["traceparent"])
    span = await collector.wait_for(lambda c: next((s for s in c.spans if s.span_id == parent), None))
    assert span.attributes["network.transport"] == "tcp"
    assert span.attributes["network.protocol.name"] == "http"
    assert span.attributes["network.protocol.version"] == "1.1"  # as on SERVER spans over HTTP
    assert span.attributes["server.address"] == "127.0.0.1"
    assert isinstance(span.attributes["server.port"], int)
    assert span.attributes["prompt_gateway.upstream"] == "web"
    return span


async def a_failed_get(collector: Collector, client: Client) -> ReceivedSpan:
    with pytest.raises(MCPError):
        await client.get_prompt("pipe__missing", meta=CLIENT_CONTEXT)
    span = await collector.wait_for(lambda c: c.span("prompts/get pipe__missing", "SERVER"))
    assert span.attributes["error.type"] == "-32602"
    assert span.attributes["rpc.response.status_code"] == "-32602"
    assert span.status_code == 2  # ERROR
    assert "pipe__missing" in span.status_message
    return span


async def the_metrics(collector: Collector) -> None:
    for name in ("mcp.server.operation.duration", "mcp.client.operation.duration"):
        metric = await collector.wait_for(lambda c, name=name: c.metrics.get(name))
        assert metric.unit == "s"
        point = metric.histogram.data_points[0]
        assert list(point.explicit_bounds) == DURATION_BUCKETS
        assert "mcp.method.name" in {a.key for a in point.attributes}


async def test_a_trace_over_stdio_from_client_to_upstream(tmp_path: Path) -> None:
    async with otlp_collector() as collector, http_upstream("meta_echo", "streamable-http") as web_url:
        config = write_config(tmp_path / "g.toml", upstreams(web_url), telemetry=telemetry(collector))
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "gateway", "serve", "--config", str(config), "--log-level", "warning"],
            cwd=str(ROOT),
            env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), **EXPORT_SOON},
        )
        async with Client(params, mode="legacy", cache=None) as client:
            result = await client.get_prompt("pipe__echo", meta=CLIENT_CONTEXT)
            server = await follow_one_get(collector, result, front="pipe__echo", local="echo")
            check_conventions(server, kind="SERVER", method="prompts/get", prompt="pipe__echo", transport="pipe")
            assert server.attributes["mcp.protocol.version"] == client.protocol_version
            assert "mcp.session.id" not in server.attributes  # stdio has no session id
            await the_other_upstream(collector, client, "web__echo")
            await a_failed_get(collector, client)
        await the_metrics(collector)


async def test_a_trace_over_streamable_http_sessions_links_the_http_context(tmp_path: Path) -> None:
    async with otlp_collector() as collector, http_upstream("meta_echo", "streamable-http") as web_url:
        server_settings = {"transport": "http", "port": 0}
        config = write_config(
            tmp_path / "g.toml", upstreams(web_url), server=server_settings, telemetry=telemetry(collector)
        )
        async with running_gateway(config, env=EXPORT_SOON) as gateway:
            async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
                result = await client.get_prompt("pipe__echo", meta=CLIENT_CONTEXT)
                server = await follow_one_get(collector, result, front="pipe__echo", local="echo")
                check_conventions(server, kind="SERVER", method="prompts/get", prompt="pipe__echo", transport="tcp")
                assert server.attributes["network.protocol.name"] == "http"
                assert server.attributes["client.address"] == "127.0.0.1"
                assert len(server.attributes["mcp.session.id"]) == 32  # a digest of the id, never the id
                await the_other_upstream(collector, client, "web__echo")
                await a_failed_get(collector, client)

            # the HTTP request's own traceparent: the parent when _meta has none, linked when it has
            http_trace, http_span = "a" * 32, "b" * 16
            headers = {**HTTP_HEADERS, "traceparent": f"00-{http_trace}-{http_span}-01"}
            async with httpx.AsyncClient(base_url=gateway.url) as http:
                opened = await http.post("/mcp", json=INITIALIZE, headers=headers)
                session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
                await http.post(
                    "/mcp",
                    json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                    headers={**headers, **session},
                )
                get = {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "prompts/get",
                    "params": {"name": "pipe__echo", "_meta": dict(CLIENT_CONTEXT)},
                }
                await http.post("/mcp", json=get, headers={**headers, **session})
            initialize = await collector.wait_for(
                lambda c: next((s for s in c.spans if s.name == "initialize" and s.trace_id == http_trace), None)
            )
            assert initialize.parent_span_id == http_span
            linked = await collector.wait_for(
                lambda c: next(
                    (s for s in c.spans if s.kind_name == "SERVER" and (http_trace, http_span) in s.links), None
                )
            )
            assert linked.trace_id == TRACE_ID
            assert linked.parent_span_id == CLIENT_SPAN_ID
        await the_metrics(collector)
        session_metric = await collector.wait_for(lambda c: c.metrics.get("mcp.server.session.duration"))
        assert list(session_metric.histogram.data_points[0].explicit_bounds) == DURATION_BUCKETS


async def test_a_trace_of_stateless_2026_07_28_requests_has_no_session(tmp_path: Path) -> None:
    async with otlp_collector() as collector, http_upstream("meta_echo", "streamable-http") as web_url:
        config = write_config(
            tmp_path / "g.toml",
            upstreams(web_url),
            server={"transport": "http", "port": 0},
            telemetry=telemetry(collector),
        )
        async with (
            running_gateway(config, env=EXPORT_SOON) as gateway,
            Client(f"{gateway.url}/mcp", cache=None) as client,
        ):
            assert client.protocol_version == "2026-07-28"
            result = await client.get_prompt("pipe__echo", meta=CLIENT_CONTEXT)
            server = await follow_one_get(collector, result, front="pipe__echo", local="echo")
            check_conventions(server, kind="SERVER", method="prompts/get", prompt="pipe__echo", transport="tcp")
            assert server.attributes["mcp.protocol.version"] == "2026-07-28"
            assert "mcp.session.id" not in server.attributes  # 2026-07-28 has no sessions
            await the_other_upstream(collector, client, "web__echo")
            await a_failed_get(collector, client)
            await client.list_prompts()
            fan_out = await collector.wait_for(lambda c: c.span("prompts/list fan-out", "INTERNAL"))
            listing = next(s for s in collector.spans if s.name == "prompts/list" and s.kind_name == "SERVER")
            assert fan_out.parent_span_id == listing.span_id
            assert fan_out.attributes["prompt_gateway.upstreams"] == 2
        await the_metrics(collector)
        assert "mcp.server.session.duration" not in collector.metrics


@pytest.mark.parametrize("verbatim", [False, True])
async def test_an_upstreams_error_message_is_exported_only_when_opted_in(tmp_path: Path, verbatim: bool) -> None:
    """An upstream's own error message may quote an argument's value (as this one does), and the docs
    promise argument values are never recorded: the SERVER and CLIENT spans copied it into their status
    description. They say it in the gateway's words now, as the audit does, unless opted in."""
    secret = "hunter2-do-not-record"
    async with otlp_collector() as collector, http_upstream("meta_echo", "streamable-http") as web_url:
        config = write_config(
            tmp_path / "g.toml",
            upstreams(web_url),
            server={"transport": "http", "port": 0},
            telemetry={**telemetry(collector), "upstream_error_messages": verbatim},
        )
        async with (
            running_gateway(config, env=EXPORT_SOON) as gateway,
            Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client,
        ):
            for front in ("pipe__refuse", "web__refuse"):
                with pytest.raises(MCPError) as refused:
                    await client.get_prompt(front, {"value": secret}, meta=CLIENT_CONTEXT)
                assert secret in refused.value.error.message  # the client is told what its upstream said

            def failed(c: Collector) -> list[ReceivedSpan] | None:
                found = [
                    s
                    for s in c.spans
                    if s.attributes.get("gen_ai.prompt.name") in ("pipe__refuse", "web__refuse", "refuse")
                ]
                return found if len(found) == 4 else None

            spans = await collector.wait_for(failed)
        for span in spans:
            assert span.status_code == 2  # ERROR
            assert span.attributes["error.type"] == "-32602"
            assert (secret in span.status_message) is verbatim, span
            if not verbatim:
                upstream = span.attributes.get("prompt_gateway.upstream") or span.name.split()[-1].split("__")[0]
                assert span.status_message == f"Upstream '{upstream}' answered with error -32602"
        assert {(s.kind_name, s.attributes.get("prompt_gateway.upstream")) for s in spans} == {
            ("SERVER", None),
            ("CLIENT", "pipe"),
            ("CLIENT", "web"),
        }


async def test_check_and_the_other_commands_export_nothing(tmp_path: Path) -> None:
    """Only ``serve`` traces: a ``check`` run as a CI probe must not put root spans into production traces."""
    async with otlp_collector() as collector:
        config = write_config(tmp_path / "g.toml", [sdk_upstream("pipe", "meta_echo")], telemetry=telemetry(collector))
        checked = await anyio.run_process(
            [sys.executable, "-m", "gateway", "check", "--config", str(config)], cwd=ROOT, check=False
        )
        assert checked.returncode == 0, checked.stderr.decode()
        assert collector.spans == []  # the process has exited: whatever it would have sent, it had sent
        assert collector.metrics == {}


def test_telemetry_on_without_the_sdk_installed_is_a_config_error_saying_how(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")  # an opentelemetry without the SDK
    config = write_config(tmp_path / "g.toml", [], telemetry={"enabled": True})
    checked = subprocess.run(
        [sys.executable, "-m", "gateway", "check", "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=60,
        env={**os.environ, "PYTHONPATH": f"{shadow.parent}{os.pathsep}{ROOT}"},
    )  # fmt: skip
    assert checked.returncode == 2, checked.stderr
    assert "Traceback" not in checked.stderr
    assert "[telemetry] is enabled but the OpenTelemetry SDK is not installed" in checked.stderr
    assert "pip install '.[telemetry]'" in checked.stderr


@asynccontextmanager
async def unreachable_collector(how: str) -> AsyncIterator[str]:
    """An OTLP endpoint that is down (nothing listens on its port), or black-holed (connections are
    accepted, and nothing is ever answered)."""
    if how == "down":
        yield f"http://127.0.0.1:{free_port()}"
        return

    async def hold(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await anyio.sleep_forever()

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, hold)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio's, not Django's
        yield f"http://127.0.0.1:{port}"
        tg.cancel_scope.cancel()


@pytest.mark.parametrize("how", ["down", "black-holed"])
async def test_shutdown_with_the_collector_unreachable_ends_within_the_grace(tmp_path: Path, how: str) -> None:
    """The exporters' final flush (10 s an attempt, retried; traces, then metrics) held a stopping gateway
    15 to 25 s, past systemd's TimeoutStopSec: bounded by ``shutdown_grace_s`` now."""
    grace = 2
    async with unreachable_collector(how) as endpoint:
        config = write_config(
            tmp_path / "g.toml",
            [sdk_upstream("pipe", "meta_echo")],
            gateway={"shutdown_grace_s": grace},
            server={"transport": "http", "port": 0},
            telemetry={"enabled": True, "endpoint": endpoint, "metrics_interval_s": 3600},
        )
        async with running_gateway(config) as gateway:
            async with Client(f"{gateway.url}/mcp", mode="legacy", cache=None) as client:
                await client.get_prompt("pipe__echo")  # spans and a histogram buffered, for the final flush
            gateway.process.terminate()
            with anyio.fail_after(grace + 6):  # generous: the whole stop, not the flush alone
                await gateway.process.wait()
            assert gateway.process.returncode == 0
            abandoned = await gateway.wait_for_event("telemetry_export_abandoned")
            assert abandoned["waited_s"] == grace


async def test_a_request_the_sampler_drops_carries_its_trace_upstream_as_the_sdk_does(tmp_path: Path) -> None:
    """``sample_ratio`` drops most requests at the edge, with no span made for them (unsampled.py): what
    leaves the gateway is what the SDK's non-recording spans sent. A fresh trace goes upstream unsampled
    with the random-trace-id flag; a client's unsampled trace goes on in its own trace id, tracestate and
    baggage; a client's sampled trace is still followed; the duration histograms count every request,
    a failed one with its error.type, and only the sampled request's carry exemplars, naming its spans."""
    async with otlp_collector() as collector, http_upstream("meta_echo", "streamable-http") as web_url:
        config = write_config(
            tmp_path / "g.toml",
            upstreams(web_url),
            server={"transport": "http", "port": 0},
            telemetry={**telemetry(collector), "sample_ratio": 0.0},
        )
        async with (
            running_gateway(config, env=EXPORT_SOON) as gateway,
            Client(f"{gateway.url}/mcp", cache=None) as client,
        ):
            fresh = received(await client.get_prompt("web__echo"))
            version, trace_id, span_id, flags = fresh["meta"]["traceparent"].split("-")
            assert (version, flags) == ("00", "02")  # not sampled, a random trace id: the SDK's flags
            assert int(trace_id, 16)
            assert int(span_id, 16)
            assert fresh["headers"]["traceparent"] == fresh["meta"]["traceparent"]
            assert "tracestate" not in fresh["meta"]
            assert "baggage" not in fresh["meta"]

            unsampled = {**CLIENT_CONTEXT, "traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-00"}
            carried = received(await client.get_prompt("pipe__echo", meta=unsampled))
            version, trace_id, span_id, flags = carried["meta"]["traceparent"].split("-")
            assert (version, trace_id, flags) == ("00", TRACE_ID, "00")
            assert span_id != CLIENT_SPAN_ID
            assert int(span_id, 16)
            assert carried["meta"]["tracestate"] == CLIENT_CONTEXT["tracestate"]
            assert carried["meta"]["baggage"] == CLIENT_CONTEXT["baggage"]

            with pytest.raises(MCPError):
                await client.get_prompt("pipe__missing")

            result = await client.get_prompt("pipe__echo", meta=CLIENT_CONTEXT)  # sampled by the client
            server = await follow_one_get(collector, result, front="pipe__echo", local="echo")
            _, upstream_parent = traceparent_parts(received(result)["meta"]["traceparent"])
            exemplars = {
                ("mcp.server.operation.duration", TRACE_ID, server.span_id),
                ("mcp.client.operation.duration", TRACE_ID, upstream_parent),
            }
            await collector.wait_for(lambda c: c.exemplars >= exemplars)  # each names the span it timed

            def failed_counted(c: Collector) -> bool:
                metric = c.metrics.get("mcp.server.operation.duration")
                points = metric.histogram.data_points if metric is not None else []
                kinds = [{a.key: a.value.string_value for a in p.attributes}.get("error.type") for p in points]
                return "-32602" in kinds and sum(p.count for p in points) >= 4

            await collector.wait_for(failed_counted)
        assert {s.trace_id for s in collector.spans} == {TRACE_ID}  # the dropped requests made none
        assert collector.exemplars == exemplars  # nor exemplars
