"""What the operator page shows, read from the running gateway: upstream states, the catalog with who
sees each prompt, explanations, recent audit events. The page (``frontend/admin/page.py``) renders it;
this reads it, so the front end knows nothing of how the gateway is put together."""

from __future__ import annotations

import statistics
from typing import Any

from gateway.app import Gateway
from gateway.catalog.explain import Layer
from gateway.catalog.policy import Rules
from gateway.config import FilesUpstream, HttpUpstream

ANYONE = "a caller without a token"


class GatewayOperatorView:
    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        server = gateway.config.server
        self.tokens = [t.name for t in server.tokens]
        self.views = [v.name for v in server.views]
        self.audit_enabled = server.audit.file is not None or gateway.audit.recent.maxlen != 0

    def upstreams(self) -> list[dict[str, Any]]:
        counts = self._gateway.catalog.listed_counts()
        rows = []
        for settings in self._gateway.config.upstreams:
            connector = next(c for c in self._gateway.connectors if c.namespace == settings.namespace)
            recent = list(getattr(connector, "recent_ms", ()))
            transport: str = "files" if isinstance(settings, FilesUpstream) else settings.transport
            if isinstance(settings, HttpUpstream):
                transport = f"{transport} {settings.url.split('?', 1)[0].split('@')[-1]}"  # never a user part
            rows.append({
                "namespace": settings.namespace,
                "transport": transport,
                "state": connector.state,
                "prompts": counts.get(settings.namespace, 0),
                "latency": f"{statistics.median(recent):.1f} ms (last {len(recent)})" if recent else "",
                "restarts": getattr(connector, "restarts", 0),
                "last_error": (connector.last_error or "")[:300] if not connector.ready else "",
            })  # fmt: skip
        return rows

    def _callers(self) -> list[tuple[str, list[Layer]]]:
        separator = self._gateway.config.gateway.namespace_separator
        server = self._gateway.config.server
        callers: list[tuple[str, list[Layer]]] = [] if server.tokens else [(ANYONE, [])]
        callers += [
            (f"token {t.name}", [Layer(f"token {t.name}'s policy", Rules.of(t.policy, separator))])
            for t in server.tokens
        ]
        callers += [(f"view {v.name}", [Layer(f"view {v.name}", Rules.of(v.policy, separator))]) for v in server.views]
        return callers

    def _layers(self, caller: str) -> tuple[str, list[Layer]] | None:
        wanted = {"": ANYONE, **{f"token:{t}": f"token {t}" for t in self.tokens}}
        wanted |= {f"view:{v}": f"view {v}" for v in self.views}
        label = wanted.get(caller)
        if label is None:
            return None
        return next(((who, layers) for who, layers in self._callers() if who == label), (ANYONE, []))

    async def prompts(self) -> list[dict[str, Any]]:
        """Every prompt the upstreams list, with whom (each token, each view) it is shown to."""
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for who, layers in self._callers():
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

    async def explain(self, name: str, caller: str) -> tuple[bool, str]:
        found = self._layers(caller)
        if found is None:
            return False, f"no such caller: {caller!r}"
        who, layers = found
        explained, unavailable = await self._gateway.catalog.explanations(layers, name)
        if not explained:
            return False, f"no upstream lists a prompt named {name!r}"
        lines = [f"for {who}:"] + [line for item in explained for line in item.described()]
        lines += [f"(upstream {namespace} is unavailable: its prompts are not explained)" for namespace in unavailable]
        return any(item.visible for item in explained), "\n".join(lines)

    def audit_events(self) -> list[dict[str, Any]]:
        shown = []
        for event in reversed(self._gateway.audit.recent):
            who = event.get("who")
            described = f"{who.get('kind', '?')} {who.get('name', '')}".strip() if isinstance(who, dict) else "no token"
            shown.append({**event, "who": described})
        return shown

    async def changed(self) -> None:
        await self._gateway.states_changed()
