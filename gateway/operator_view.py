"""What the operator page shows, read from the running gateway: upstream states, the catalog with who
sees each prompt, explanations, recent audit events. The page (``frontend/admin/page.py``) renders it;
this reads it, so the front end knows nothing of how the gateway is put together."""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from gateway.app import Gateway
from gateway.catalog.explain import Layer, not_found
from gateway.catalog.policy import Rules
from gateway.config import FilesUpstream, HttpUpstream
from gateway.explaining import caller_layers

if TYPE_CHECKING:
    from gateway.sources.files.source import FilePromptSource  # Jinja2, YAML, watchfiles: only for files
    from gateway.sources.upstream import UpstreamConnector

SHOWN_OF_AN_AUDIT_EVENT = ("timestamp", "who", "method", "prompt", "skill", "outcome", "code", "status", "reason")
"""What the page shows of an audit event, and all it is sent of one (not an argument's value, if kept):
a skill read's ``skill`` URI shows where a get's ``prompt`` does."""


class GatewayOperatorView:
    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        server = gateway.config.server
        self.audit_enabled = server.audit.file is not None or gateway.audit.recent.maxlen != 0

    def upstreams(self) -> list[dict[str, Any]]:
        counts = self._gateway.catalog.listed_counts()
        replacing = self._gateway.replacements()
        rows = []
        for settings in self._gateway.config.upstreams:
            connector = next(c for c in self._gateway.connectors if c.namespace == settings.namespace)
            recent = list(getattr(connector, "recent_ms", ()))
            transport: str = "files" if isinstance(settings, FilesUpstream) else settings.transport
            if isinstance(settings, HttpUpstream) and settings.unresolved is None:  # else a stand-in's URL
                transport = f"{transport} {settings.url.split('?', 1)[0].split('@')[-1]}"  # never a user part
            rows.append({
                "namespace": settings.namespace,
                "transport": transport,
                "state": connector.state,
                "prompts": counts.get(settings.namespace, 0),
                "latency": f"{statistics.median(recent):.1f} ms (last {len(recent)})" if recent else "",
                "restarts": getattr(connector, "restarts", 0),
                "last_error": (_replacing(replacing.get(settings.namespace)) or connector.last_error or "")[:300],
            })  # fmt: skip
        return rows

    def _callers(self) -> list[tuple[str, str, str, list[Layer]]]:
        """(the form's value, a short label for "seen by", who it is in the words of ``prompt-gateway
        explain``, the policies beyond the global one): a caller without a token where none are required,
        each token, each view, and with [server.auth] a person whose token matches no view."""
        config = self._gateway.config
        server = config.server
        callers: list[tuple[str, str, str, list[Layer]]] = []
        if not server.tokens and server.auth is None:
            callers.append(("", "a caller without a token", *caller_layers(config, token=None, claims=None)))
        callers += [
            (f"token:{t.name}", f"token {t.name}", *caller_layers(config, token=t.name, claims=None))
            for t in server.tokens
        ]
        separator = config.gateway.namespace_separator
        callers += [
            (
                f"view:{v.name}",
                f"view {v.name}",
                f"a person whose token matches view {v.name}",
                [Layer(f"view {v.name}", Rules.of(v.policy, separator))],
            )
            for v in server.views
        ]
        if server.auth is not None:
            callers.append(("view:", "a person in no view", "a person whose token matches no view", []))
        return callers

    def callers(self) -> list[tuple[str, str]]:
        return [(value, label) for value, label, _, _ in self._callers()]

    async def prompts(self) -> list[dict[str, Any]]:
        """Every prompt the upstreams list, with whom (each token, each view) it is shown to."""
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for _, who, _, layers in self._callers():
            explained, _ = await self._gateway.catalog.explanations(layers)
            for item in explained:
                row = rows.setdefault((item.upstream, item.local), {
                    "name": item.public, "upstream": item.upstream, "local": item.local,
                    "overridden": ", ".join(item.overridden), "tags": ", ".join(item.tags), "seen": [],
                })  # fmt: skip
                if item.visible:
                    row["seen"].append(who)
        for row in rows.values():
            row["seen_by"] = ", ".join(row.pop("seen")) or "nobody"
        return list(rows.values())

    async def explain(self, name: str, caller: str) -> tuple[int, str]:
        """The explain form's answer as ``prompt-gateway explain`` prints it, and its HTTP status."""
        found = next(((who, layers) for value, _, who, layers in self._callers() if value == caller), None)
        if found is None and caller == "":  # (where tokens are required: a caller on stdio)
            found = caller_layers(self._gateway.config, token=None, claims=None)
        if found is None:
            return 400, f"no such caller: {caller!r}"
        who, layers = found
        prompts, skills, unavailable, everything = await self._gateway.catalog.explain_all(layers, name)
        explained = prompts + skills  # (a skill by its policy name or URI)
        if not explained:
            return 404, not_found(name, everything)
        lines = [f"for {who}:"] + [line for item in explained for line in item.described()]
        lines += [f"(upstream {up} is unavailable: what it serves is not explained)" for up in unavailable]
        return 200, "\n".join(lines)

    def audit_events(self) -> list[dict[str, Any]]:
        shown = []
        for event in reversed(self._gateway.audit.recent):
            who = event.get("who")
            if isinstance(who, dict) and who.get("kind") == "anonymous":
                described = "anonymous (no token required)"
            elif isinstance(who, dict):
                described = f"{who.get('kind', '?')} {who.get('name', '')}".strip()
            else:  # refused at the door before its token was read or accepted: nobody known yet
                described = "unknown"
            shown.append({key: event.get(key) for key in SHOWN_OF_AN_AUDIT_EVENT} | {"who": described})
        return shown

    def versions(self) -> tuple[int, int]:
        return self._gateway.states_version, self._gateway.audit.kept

    async def changed(self) -> None:
        async with anyio.create_task_group() as tg:

            async def first(wait: Callable[[], Awaitable[None]]) -> None:
                await wait()
                tg.cancel_scope.cancel()

            tg.start_soon(first, self._gateway.states_changed)
            tg.start_soon(first, self._gateway.audit.kept_another)


def _replacing(successor: UpstreamConnector | FilePromptSource | None) -> str | None:
    """What the row says while a reload's successor has not taken over (the row is the connection that
    serves): its state, and why it is not ready yet."""
    if successor is None:
        return None
    why = f": {successor.last_error}" if successor.last_error else ""
    return f"serving from before the reload; its replacement is {successor.state}{why}"
