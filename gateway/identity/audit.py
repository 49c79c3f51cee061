"""The audit trail: one ``audit`` event per ``prompts/get``, ``completion/complete``, skill read
(``skills/get``, ``resources/read``, ``resources/directory/read``: what a skill gives an agent) and
refused request, saying who (typed: a static token by name, an access token by issuer and subject, the
stdio client, or anonymous over HTTP where no credentials are asked), what (method, prompt or skill URI,
upstream), the outcome, why it failed in the gateway's words, and how long it took.

Arguments are named, never valued, unless the operator turns values on (``[server.audit]
argument_values``): a prompt's arguments are where people paste what they are working on. Events go to
the log with the others (stderr), or to a JSONL file of their own, one object a line, appended.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import anyio
import structlog

from gateway.config import AuditSettings
from gateway.identity.principal import ANONYMOUS, Identity
from gateway.observability.logs import STANDARD_KEYS, info_after_answer, json_text
from gateway.protocol.errors import SAID_BY_THE_GATEWAY, DigestMismatch, RateLimited, UpstreamRejected
from gateway.protocol.jsonrpc import JSON_OBJECT

log = structlog.get_logger("gateway.audit")

SKILL_READS = frozenset({"skills/get", "resources/read", "resources/directory/read"})
AUDITED = frozenset({"prompts/get", "completion/complete"}) | SKILL_READS
MAX_ARGUMENTS = 64
MAX_VALUE_CHARS = 1024


def arguments_of(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The request's argument names (and values, to be kept only if the operator asked): a get's
    ``arguments``, a completion's ``argument`` and ``context.arguments``."""
    params = params or {}
    found: dict[str, Any] = {}
    if method == "prompts/get" and isinstance(params.get("arguments"), JSON_OBJECT):
        found.update(params["arguments"])
    if method == "completion/complete":
        argument = params.get("argument")
        if isinstance(argument, JSON_OBJECT) and isinstance(argument.get("name"), str):
            found[argument["name"]] = argument.get("value")
        context = params.get("context")
        if isinstance(context, JSON_OBJECT) and isinstance(context.get("arguments"), JSON_OBJECT):
            found.update(context["arguments"])
    return {str(k)[:256]: v for k, v in list(found.items())[:MAX_ARGUMENTS]}


def prompt_of(method: str, params: Any) -> str | None:
    """The prompt a request names (a get's ``name``, a completion's ``ref.name``), whatever shape its
    params have: this reads what a client sent, valid or not (a refused request's body included)."""
    if not isinstance(params, JSON_OBJECT) or method in SKILL_READS:
        return None
    if method == "prompts/get":
        name = params.get("name")
    else:
        ref = params.get("ref")
        name = ref.get("name") if isinstance(ref, JSON_OBJECT) else None
    return name[:512] if isinstance(name, str) else None


def skill_of(method: str, params: Any) -> str | None:
    """The skill URI a skill read names (its ``uri``), whatever shape its params have."""
    if method not in SKILL_READS or not isinstance(params, JSON_OBJECT):
        return None
    uri = params.get("uri")
    return uri[:512] if isinstance(uri, str) else None


def _named(method: str, params: Any) -> dict[str, str | None]:
    """What a request names, under its kind: a prompt, or for a skill read the skill URI as well."""
    if method in SKILL_READS:
        return {"prompt": None, "skill": skill_of(method, params)}
    return {"prompt": prompt_of(method, params) if method in AUDITED else None}


OWN_KEYS = frozenset({
    "who", "method", "prompt", "skill", "upstream", "arguments", "outcome", "code", "reason", "duration_ms",
    "status", "limit", "retry_after_ms", "more_in_batch",
}) | STANDARD_KEYS  # fmt: skip
"""The event's keys whose values the gateway writes itself (the log's redaction need not read them; an
argument's value, under ``argument_values``, is the client's and is read)."""

MAX_REFUSED_EVENTS = 32
"""A refused batch is audited a member at a time, up to this many (the rest are counted in the last)."""


def asked_in(body: bytes | None) -> list[tuple[str, str | None]]:
    """The method and prompt (a skill read's URI) of each message a request body holds (a batch's members
    in order); empty for a body that is no JSON-RPC request. A ``tools/call`` of ``get_prompt`` names its
    prompt too."""
    try:
        decoded = json.loads(body) if body else None
    except (ValueError, RecursionError):
        return []
    found: list[tuple[str, str | None]] = []
    for message in decoded if isinstance(decoded, list) else [decoded]:
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            continue
        method: str = message["method"][:128]
        params = message.get("params")
        if method == "tools/call" and isinstance(params, JSON_OBJECT) and params.get("name") == "get_prompt":
            found.append((method, prompt_of("prompts/get", params.get("arguments"))))
        else:
            found.append(
                (method, skill_of(method, params) or (prompt_of(method, params) if method in AUDITED else None))
            )
    return found


@dataclass(frozen=True)
class RefusedRequest:
    """A request refused before it was served, as the audit is told of it: the refusal, who (when the
    credentials said so before something else refused them), and what it asked, as far as it says."""

    status: int
    reason: str
    identity: Identity | None
    method: str | None  # its Mcp-Method header (2026-07-28)
    name: str | None  # its Mcp-Name header
    body: bytes | None  # else its body, when one was read within the bound


class AuditTrail:
    def __init__(self, settings: AuditSettings, *, keep_recent: int = 0) -> None:
        self._values = settings.argument_values
        self.recent: deque[dict[str, Any]] = deque(maxlen=keep_recent)
        """The last events, newest last (the operator page shows them)."""
        self.kept = 0
        """How many events ``recent`` has taken so far: a page compares it with what it showed."""
        self._waiting: anyio.Event | None = None  # made only while a page waits: no cost per request otherwise
        self._file: TextIO | None = None
        if settings.file is not None:
            self._file = Path(settings.file).open("a", encoding="utf-8")  # noqa: SIM115 - lives with the trail

    def record(self, **event: Any) -> None:
        self.write(event)

    def write(self, event: dict[str, Any]) -> None:
        """Record one event (the trail owns the dict from here on)."""
        if self.recent.maxlen:
            self.recent.append({"timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **event})
            self.kept += 1
            if self._waiting is not None:
                self._waiting.set()
                self._waiting = None
        if self._file is None:
            # every key but argument_values is the gateway's own: a line without it needs no redaction. The
            # line is made once the answer is out (the log is written in batches anyway); to a file of
            # its own it is written before the answer, so the file has it when the client has the answer
            if not info_after_answer("audit", event, OWN_KEYS if "argument_values" in event else None):
                log.info("audit", **event)
            return
        line = {"event": "audit", "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **event}
        self._file.write(json_text(line) + "\n")
        self._file.flush()

    async def kept_another(self) -> None:
        """Until ``recent`` takes another event."""
        if self._waiting is None:
            self._waiting = anyio.Event()
        await self._waiting.wait()

    def request(
        self, who: Identity | None, method: str, params: Mapping[str, Any] | None, upstream: str | None
    ) -> AuditedRequest:
        """Around a request: its event once it has an outcome (an error's code, or ``ok``). ``params``
        have been validated (a request whose params are invalid is recorded by :meth:`invalid`)."""
        arguments = arguments_of(method, params)
        event: dict[str, Any] = {
            "who": (who or ANONYMOUS).described(),
            "method": method,
            **_named(method, params),
            "upstream": upstream,
            "arguments": sorted(arguments),
        }
        if self._values:
            event["argument_values"] = {k: str(v)[:MAX_VALUE_CHARS] for k, v in arguments.items()}
        event["outcome"] = "cancelled"
        return AuditedRequest(self, event)

    def invalid(self, who: Identity | None, method: str, params: Any, message: str) -> None:
        """A request refused for its params (-32602) before anything read them."""
        self.record(
            who=(who or ANONYMOUS).described(),
            method=method,
            **_named(method, params),
            outcome="error",
            code=-32602,
            reason=message[:300],
        )

    def limited(self, who: Identity | None, method: str, params: Any, refusal: RateLimited) -> None:
        """A request over a ``[limits]`` rate, refused before it was served."""
        self.record(
            who=(who or ANONYMOUS).described(),
            method=method[:128],
            **_named(method, params),
            outcome="rate_limited",
            code=refusal.code,
            limit=refusal.limit,
            retry_after_ms=refusal.data["retryAfterMs"],
        )

    def refused(self, refusal: RefusedRequest) -> None:
        """A request refused at the door (HTTP status), with who as far as it is known, and what it asked:
        what its body holds (each member of a batch), else its ``Mcp-Method``/``Mcp-Name`` headers (the
        body decides: a header cannot make the audit say another prompt was asked for)."""
        asked: list[tuple[str | None, str | None]] = list(asked_in(refusal.body))
        if not asked:
            method = refusal.method[:128] if refusal.method is not None else None
            prompt = refusal.name[:512] if refusal.name is not None and method in AUDITED else None
            asked = [(method, prompt)]
        who = refusal.identity.described() if refusal.identity is not None else None
        shown = asked[:MAX_REFUSED_EVENTS]
        for index, (method, prompt) in enumerate(shown):
            named = {"prompt": None, "skill": prompt} if method in SKILL_READS else {"prompt": prompt}
            event: dict[str, Any] = {"who": who, "method": method, **named, "outcome": "refused"}
            event.update(status=refusal.status, reason=refusal.reason[:300])
            if index == len(shown) - 1 and len(asked) > len(shown):
                event["more_in_batch"] = len(asked) - len(shown)
            self.record(**event)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class AuditedRequest:
    """One request's audit event, recorded when the request has its outcome. A plain context manager:
    ``contextlib``'s generator-based one costs several times more, on every audited request."""

    __slots__ = ("_event", "_started", "_trail")

    def __init__(self, trail: AuditTrail, event: dict[str, Any]) -> None:
        self._trail, self._event = trail, event
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: TracebackType | None) -> None:
        event = self._event
        if exc is None:
            event["outcome"] = "ok"
        elif isinstance(exc, Exception):  # a cancellation (BaseException) stays "cancelled"
            code = getattr(exc, "code", None)
            event.update(outcome="error", code=code if isinstance(code, int) else None)
            if isinstance(exc, SAID_BY_THE_GATEWAY):  # never an upstream's words: they may quote a value
                event["reason"] = exc.message[:300]
            elif isinstance(exc, (UpstreamRejected, DigestMismatch)):
                event["reason"] = exc.reason[:300]
        # (to two decimals: round(x, 2) goes through a decimal conversion, five times round(x)'s cost)
        event["duration_ms"] = round((time.perf_counter() - self._started) * 100_000) / 100
        self._trail.write(event)
