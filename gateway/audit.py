"""The audit trail: one ``audit`` event per ``prompts/get``, ``completion/complete`` and refused request,
saying who (a token's name or an access token's subject), what (method, prompt, upstream), the outcome
and how long it took.

Arguments are named, never valued, unless the operator turns values on (``[server.audit]
argument_values``): a prompt's arguments are where people paste what they are working on. Events go to
the log with the others (stderr), or to a JSONL file of their own, one object a line, appended.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import structlog

from gateway.config import AuditSettings

log = structlog.get_logger("gateway.audit")

AUDITED = frozenset({"prompts/get", "completion/complete"})
MAX_ARGUMENTS = 64
MAX_VALUE_CHARS = 1024


def arguments_of(method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The request's argument names (and values, to be kept only if the operator asked): a get's
    ``arguments``, a completion's ``argument`` and ``context.arguments``."""
    params = params or {}
    found: dict[str, Any] = {}
    if method == "prompts/get" and isinstance(params.get("arguments"), Mapping):
        found.update(params["arguments"])
    if method == "completion/complete":
        argument = params.get("argument")
        if isinstance(argument, Mapping) and isinstance(argument.get("name"), str):
            found[argument["name"]] = argument.get("value")
        context = params.get("context")
        if isinstance(context, Mapping) and isinstance(context.get("arguments"), Mapping):
            found.update(context["arguments"])
    return {str(k)[:256]: v for k, v in list(found.items())[:MAX_ARGUMENTS]}


def prompt_of(method: str, params: Mapping[str, Any] | None) -> str | None:
    params = params or {}
    name = params.get("name") if method == "prompts/get" else (params.get("ref") or {}).get("name")
    return name[:512] if isinstance(name, str) else None


class AuditTrail:
    def __init__(self, settings: AuditSettings) -> None:
        self._values = settings.argument_values
        self._file: TextIO | None = None
        if settings.file is not None:
            self._file = Path(settings.file).open("a", encoding="utf-8")  # noqa: SIM115 - lives with the trail

    def record(self, **event: Any) -> None:
        if self._file is None:
            log.info("audit", **event)
            return
        line = {"event": "audit", "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **event}
        self._file.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    @contextmanager
    def request(
        self, who: str | None, method: str, params: Mapping[str, Any] | None, upstream: str | None
    ) -> Iterator[None]:
        """Around a request: its event once it has an outcome (an error's code, or ``ok``)."""
        arguments = arguments_of(method, params)
        event: dict[str, Any] = {
            "who": who,
            "method": method,
            "prompt": prompt_of(method, params),
            "upstream": upstream,
            "arguments": sorted(arguments),
        }
        if self._values:
            event["argument_values"] = {k: str(v)[:MAX_VALUE_CHARS] for k, v in arguments.items()}
        event["outcome"] = "cancelled"
        started = time.perf_counter()
        try:
            yield
        except Exception as exc:
            code = getattr(exc, "code", None)
            event.update(outcome="error", code=code if isinstance(code, int) else None)
            raise
        else:
            event["outcome"] = "ok"
        finally:
            event["duration_ms"] = round((time.perf_counter() - started) * 1000, 2)
            self.record(**event)

    def refused(self, status: int, reason: str, *, who: str | None = None) -> None:
        self.record(who=who, outcome="refused", status=status, reason=reason[:300])

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
