"""Hostile input at both front ends. Every request gets one well-formed answer, never an internal error,
the gateway stays up, and another client's session is unaffected. Every method the gateway answers is
fuzzed, with what reads requests before they are served turned on: the audit, a view, prompts as tools,
rate limits and tracing."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.mounts import Mount
from gateway.catalog.policy import Rules
from gateway.config import AuditSettings, LimitsSettings, ServerSettings, TelemetrySettings
from gateway.frontend.http.messages import HTTP_STATUS_FOR_CODE
from gateway.frontend.http.server import HttpFrontend
from gateway.frontend.http.sessions import Ask, Push
from gateway.frontend.hub import Hub, Listener, Subscription
from gateway.frontend.service import KNOWN_METHODS, PromptService
from gateway.frontend.session import ClientSession
from gateway.identity.audit import AuditTrail
from gateway.identity.principal import Identity
from gateway.identity.rate_limits import Counts, RateLimits
from gateway.observability import tracing
from gateway.observability.otel import OpenTelemetryTracing
from gateway.protocol.jsonrpc import Request
from gateway.protocol.modern import CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY, Envelope
from gateway.rpc import Notify, RpcPeer
from gateway.testing import FakePromptSource, FakeSkillSource, memory_frame_pair

MODERN_ENVELOPE = {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}}
METHODS = [
    *sorted(KNOWN_METHODS),  # every method the gateway answers
    "logging/setLevel",
    "resources/list",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/roots/list_changed",
    "",
    "x" * 300,
]
SKILL_URIS = [
    "skill://s/pdf/SKILL.md",
    "skill://s/pdf/templates/a.md",
    "skill://s/pdf/templates",
    "skill://s/pdf",
    "skill://s",
    "skill://s/pdf/../pdf/SKILL.md",
    "skill://s//pdf/SKILL.md",
    "skill://a/p00001/SKILL.md",
    "skill://s/pdf/SKILL.md\u0000",
    "skill://s/p\ud800/SKILL.md",
    "file:///etc/passwd",
]
PROMPT_NAMES = ["a__p00001", "a__nope", "A__P00001", "a__p\ud800", "a__p\u0663", "get_prompt", "list_prompts"]
# Hostile text: lone surrogates (written as \\udXXX escapes by json.dumps), non-ASCII digits, and
# non-finite numbers (written as NaN / Infinity, which Python's decoder accepts).
lone_surrogates = st.characters(categories=["Cs"])
hostile_text = (
    st.text(max_size=20)
    | st.tuples(st.text(max_size=6), lone_surrogates, st.text(max_size=6)).map("".join)
    | st.text("0123456789\u0663\u06f5\u0967\uff19\u00b2", max_size=8)
)
scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | hostile_text


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=12,
) | st.integers(55, 70).map(nested)  # around the nesting bound, in any field (relayed, one was an internal error)
ids = (
    st.integers(-(2**63), 2**63)
    | hostile_text
    | st.none()
    | st.booleans()
    | st.floats()
    | st.lists(st.integers(), max_size=2)
)
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80)
trace_values = json_values | header_text | st.just(TRACEPARENT) | st.just("x" * 9000) | st.just("00-" + "0" * 49)
trace_meta = st.fixed_dictionaries(  # what the tracing reads of a request: its W3C trace context in _meta
    {}, optional={"traceparent": trace_values, "tracestate": trace_values, "baggage": trace_values}
)
params = json_values | st.fixed_dictionaries(
    {},
    optional={
        "name": json_values | st.sampled_from(PROMPT_NAMES),
        "arguments": json_values
        | st.dictionaries(hostile_text, json_values, max_size=3)
        | st.fixed_dictionaries(
            {}, optional={"name": json_values | st.sampled_from(PROMPT_NAMES), "arguments": json_values}
        ),
        "notifications": json_values | st.just({"promptsListChanged": True, "toolsListChanged": True}),
        "cursor": json_values,
        "uri": json_values | st.sampled_from(SKILL_URIS),
        "ref": json_values | st.just({"type": "ref/prompt", "name": "a__p00001"}),
        "argument": json_values,
        "protocolVersion": json_values,
        "requestId": ids,
        "_meta": json_values
        | trace_meta
        | trace_meta.map(lambda trace: {**MODERN_ENVELOPE, **trace})
        | st.just({**MODERN_ENVELOPE, PROTOCOL_VERSION_KEY: "1999-01-01"}),
    },
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | json_values,
        "id": ids,
        "method": st.sampled_from(METHODS) | json_values,
        "params": params,
        "result": json_values,
        "error": json_values,
    },
)
requests = st.fixed_dictionaries(  # well-formed but for their params: these reach every method's own code
    {"jsonrpc": st.just("2.0"), "id": st.integers(0, 2**31), "method": st.sampled_from(METHODS), "params": params}
)
frames = (
    requests.map(lambda m: json.dumps(m).encode())
    | messages.map(lambda m: json.dumps(m).encode())
    | st.lists(messages, min_size=1, max_size=4).map(lambda ms: json.dumps(ms).encode())
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=64).filter(lambda b: b"\n" not in b)
    | st.integers(1, 3000).map(lambda depth: b"[" * depth + b"]" * depth)
    | st.integers(1, 3000).map(lambda depth: b'{"a":' * depth + b"1" + b"}" * depth)
)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def skill_source() -> FakeSkillSource:
    """A second upstream serving skills (the Skills extension's methods are fuzzed with the rest)."""
    source = FakeSkillSource("s")
    front = b"---\nname: pdf\ndescription: PDFs\n---\nUse templates/.\n"
    source.add_skill("pdf", {"SKILL.md": front, "templates/a.md": b"a", "logo.bin": b"\xff\x00"})
    return source


def catalog() -> Catalog:
    return Catalog(
        [Mount(FakePromptSource.numbered("a", 30), prefix="a__"), Mount(skill_source(), prefix="s__")],
        codec=CursorCodec(b"k" * 32),
        generation="g",
    )


class ListenersEndAtOnce(Hub):
    """Every ``subscriptions/listen`` is ended by the server as soon as it begins (as at shutdown), so
    that it answers: a listen otherwise streams for as long as its client stays."""

    def add(self, listener: Listener) -> None:
        super().add(listener)
        if isinstance(listener, Subscription):
            listener.close()


VIEWER = Rules(deny=("a__p0000[2-5]",), separator="__")
WHO = Identity.token("fuzz")


@functools.cache
def audit() -> AuditTrail:
    """One trail for the module's examples, its events written as a file trail writes them."""
    return AuditTrail(AuditSettings(file=os.devnull))


@pytest.fixture(scope="module", autouse=True)
def _audit_closed() -> Iterator[None]:
    yield
    if audit.cache_info().currsize:
        audit().close()
        audit.cache_clear()  # the module may come back to this worker later (xdist): a fresh trail then


SPANS = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def _traced() -> Iterator[None]:
    """Tracing on, every request sampled, as ``[telemetry]`` would have it: what it reads of a request
    (``_meta``'s trace context, the HTTP headers) is fuzzed with the rest; its spans kept in memory."""
    settings = TelemetrySettings(enabled=True, metrics=False)
    with tracing.installed(OpenTelemetryTracing(settings, span_exporter=SPANS, metric_reader=InMemoryMetricReader())):
        yield


def spans_all_name_their_method() -> None:
    implementation = tracing.tracing()
    assert isinstance(implementation, OpenTelemetryTracing)
    implementation.force_flush()
    finished = SPANS.get_finished_spans()
    assert finished, "tracing is on: the requests made spans"
    for span in finished:
        if span.kind.name == "SERVER":
            assert isinstance((span.attributes or {}).get("mcp.method.name"), str), span
    SPANS.clear()


LIMITS = LimitsSettings(rate="100000/second", burst="100000/second", methods={"prompts/get": "100000/second"})
"""Counted on every request (never reached here): what the limits read of a request is fuzzed too."""


def service() -> PromptService:
    limits = RateLimits(LIMITS, Counts(None, 0.25))  # one per example: the memory counts belong to its loop
    return PromptService(
        catalog,
        completions=lambda: True,
        hub=ListenersEndAtOnce(),
        audit=audit(),
        prompts_as_tools=True,
        limits=lambda: limits,
    )


def well_formed(answer: Any) -> bool:
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0" or "id" not in answer:
        return False
    if "result" in answer:
        return isinstance(answer["result"], dict) and "error" not in answer
    error = answer.get("error")
    if (
        not isinstance(error, dict)
        or not isinstance(error.get("code"), int)
        or not isinstance(error.get("message"), str)
    ):
        return False
    return error["code"] != -32603  # nothing behind the gateway fails here: an internal error is a defect


def encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def strict_json(data: bytes) -> Any:
    """What a strict peer reads: UTF-8 and RFC 8259 JSON only (no NaN, no lone surrogates)."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    decoded = json.loads(data.decode("utf-8"), parse_constant=refuse)
    json.dumps(decoded, ensure_ascii=False).encode()  # raises on a lone surrogate
    return decoded


def identifiable_request_ids(frame: bytes) -> set[Any]:
    """Ids the gateway must answer: requests that are well-formed enough to carry a usable id."""
    try:
        decoded = json.loads(frame)
    except (ValueError, RecursionError):
        return set()
    found = set()
    for message in decoded if isinstance(decoded, list) else [decoded]:
        if isinstance(message, dict) and message.get("jsonrpc") == "2.0" and isinstance(message.get("method"), str):
            request_id = message.get("id")
            usable_int = isinstance(request_id, int) and not isinstance(request_id, bool)
            if usable_int or (isinstance(request_id, str) and encodable(request_id)):  # a lone surrogate: no id
                found.add(request_id)
    return found


INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz"}}


NON_OBJECT_REF = [  # a completion whose ref is no object was an internal error: the audit read it first
    json.dumps({"jsonrpc": "2.0", "id": 7, "method": "completion/complete", "params": {"ref": ref, "argument": {}}})
    for ref in ("x", 1, [], True, "\u0000")
]


@FUZZ
@given(frames, st.sampled_from(["2025-11-25", "2025-03-26", "2024-11-05", None]))
@example(NON_OBJECT_REF[0].encode(), "2025-11-25")
@example(NON_OBJECT_REF[1].encode(), "2025-11-25")
@example(NON_OBJECT_REF[4].encode(), "2025-11-25")
def test_stdio_front_end_answers_everything_well_formed_and_stays_up(frame: bytes, version: str | None) -> None:
    """Every frame, in a session of each handshake revision (2025-03-26's batches among them) and before
    any ``initialize`` (None)."""

    async def run() -> None:
        ours, theirs = memory_frame_pair()
        session = ClientSession(service(), on_list_changed=lambda _lists: None, viewer=VIEWER, who=WHO)
        peer = RpcPeer(
            ours, on_request=session.handle_request, on_notification=session.handle_notification, answer_malformed=True
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(peer.run)
            if version is not None:
                init = {"jsonrpc": "2.0", "id": "init-probe", "method": "initialize", "params": INIT}
                init["params"] = {**INIT, "protocolVersion": version}
                await theirs.send(json.dumps(init).encode())
                assert json.loads(await theirs.receive())["result"]["protocolVersion"] == version
            await theirs.send(frame)
            await theirs.send(b'{"jsonrpc":"2.0","id":"alive-probe","method":"ping"}')
            expected = identifiable_request_ids(frame) - {"init-probe", "alive-probe"}
            seen: set[Any] = set()
            with anyio.fail_after(10):
                while "alive-probe" not in seen or not expected <= seen:
                    received = strict_json(await theirs.receive())
                    for answer in received if isinstance(received, list) else [received]:
                        if "method" in answer and "id" not in answer:  # list_changed, a listen's acknowledgement
                            continue
                        assert well_formed(answer), answer
                        seen.add(answer["id"])
            tg.cancel_scope.cancel()
        await ours.aclose()
        await theirs.aclose()

    anyio.run(run)
    spans_all_name_their_method()


def http_app() -> tuple[Any, list[ClientSession], HttpFrontend]:
    sessions: list[ClientSession] = []

    shared = service()

    def factory(principal: Identity | None, session_id: str, push: Push, ask: Ask) -> ClientSession:
        session = ClientSession(shared, on_list_changed=lambda _lists: None, viewer=VIEWER, who=WHO)
        sessions.append(session)
        return session

    async def stateless(
        request: Request, notify: Notify, principal: Identity | None, envelope: Envelope
    ) -> dict[str, Any]:
        return await shared.modern(request, notify, viewer=VIEWER, who=WHO, envelope=envelope)

    frontend = HttpFrontend(ServerSettings(transport="http"), factory, stateless=stateless, max_message_bytes=64 * 1024)
    return frontend.app(), sessions, frontend


def answers_in(response: httpx.Response) -> list[Any]:
    """The JSON-RPC messages of a response: its JSON body, or each event of an event stream."""
    if not response.content:
        return []
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        lines = response.content.decode().splitlines()
        return [strict_json(line[5:].encode()) for line in lines if line.startswith("data:") and line[5:].strip()]
    return [strict_json(response.content)]


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", "Host": "127.0.0.1:1"}


def _header_safe(value: Any) -> bool:
    return isinstance(value, str) and value.isascii() and value.isprintable() and value == value.strip() and value != ""


def mirrored_headers(body: bytes) -> dict[str, str]:
    """The headers a 2026-07-28 client sends beside a request carrying an envelope, mirrored from its body
    where they can be written as they are."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
    if not _header_safe(version) or not _header_safe(message.get("method")):
        return {}
    if (
        message["method"] == "subscriptions/listen"
        and isinstance(params, dict)
        and isinstance(params.get("notifications"), dict)
    ):
        return {}  # a valid listen streams until the client leaves: httpx's ASGI transport would wait for its end
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": message["method"]}
    assert isinstance(params, dict)
    named = params.get("name", params.get("uri"))
    if _header_safe(named):
        headers["Mcp-Name"] = named
    return headers


@FUZZ
@given(st.lists(frames, min_size=1, max_size=3), header_text | st.just(TRACEPARENT))
@example([frame.encode() for frame in NON_OBJECT_REF], TRACEPARENT)
@example(
    [json.dumps(json.loads(NON_OBJECT_REF[0]) | {"params": {"ref": "x", "_meta": MODERN_ENVELOPE}}).encode()],
    TRACEPARENT,
)
@example(
    [
        json.dumps(
            {"jsonrpc": "2.0", "id": 9, "method": method, "params": {**extra, "_meta": {**MODERN_ENVELOPE, **meta}}}
        ).encode()
        for method, extra, meta in (
            ("prompts/get", {"name": "a__p00001"}, {"progressToken": 1}),
            ("subscriptions/listen", {"notifications": 5}, {}),
            ("prompts/get", {"name": "a__nope"}, {"progressToken": 2, "x": nested(70)}),
        )
    ],
    TRACEPARENT,
)
def test_http_front_end_answers_everything_and_other_sessions_are_unaffected(
    bodies: list[bytes], traceparent: str
) -> None:
    async def run() -> None:
        app, _, frontend = http_app()
        transport = httpx.ASGITransport(app=app)
        async with (
            anyio.create_task_group() as housekeeping,  # streamed answers (listen, progress) run in its task group
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:1") as http,
        ):
            housekeeping.start_soon(frontend.run_housekeeping, housekeeping)
            await anyio.wait_all_tasks_blocked()
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
            victim = (await http.post("/mcp", json=init, headers=HEADERS)).headers["mcp-session-id"]
            bystander = (await http.post("/mcp", json=init, headers=HEADERS)).headers["mcp-session-id"]
            for body in bodies:
                hostile = {**HEADERS, "Mcp-Session-Id": victim, "traceparent": traceparent, "baggage": traceparent}
                mirrored = mirrored_headers(body)  # a 2026-07-28 request reaches its method (else it stops at -32020)
                response = await http.post("/mcp", content=body, headers={**hostile, **mirrored})
                assert response.status_code in (200, 202, 400, 404, 413, 429), response.status_code
                told = answers_in(response)
                if mirrored and len(told) == 1 and isinstance(told[0], dict):  # an error before any notification
                    error = told[0].get("error")  # has its status, a stream's too (it was inside a 200 stream)
                    if isinstance(error, dict) and error.get("code") in HTTP_STATUS_FOR_CODE:
                        assert response.status_code == HTTP_STATUS_FOR_CODE[error["code"]], (body, response.text)
                for answer in answers_in(response):
                    for item in answer if isinstance(answer, list) else [answer]:
                        if "method" in item and "id" not in item:  # a notification on an event stream
                            continue
                        assert well_formed(item), item
            listing = {"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}
            for session_id in (victim, bystander):
                answer = await http.post("/mcp", json=listing, headers={**HEADERS, "Mcp-Session-Id": session_id})
                assert answer.status_code == 200
                assert len(answer.json()["result"]["prompts"]) == 6  # the first 10, less the 4 the view denies
            housekeeping.cancel_scope.cancel()

    anyio.run(run)
    spans_all_name_their_method()
