"""A minimal MCP prompt server on the gateway's own rpc layer: enough for demos and examples. The demo
servers (``writing.py``, ``engineering.py``) import it first: their process starts here (``start_up.py``)."""

from __future__ import annotations

from gateway import start_up  # first: the garbage collector waits until the imports below are done

# isort: split
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from gateway import __version__
from gateway.observability.logs import configure_logging
from gateway.protocol.errors import InvalidParams, MethodNotFound
from gateway.protocol.jsonrpc import Request
from gateway.protocol.versions import negotiate
from gateway.rpc import Notify, RpcPeer
from gateway.transports.stdio import open_own_stdio

start_up.resume()

Render = Callable[[dict[str, str]], str]


@dataclass(frozen=True)
class DemoPrompt:
    name: str
    title: str
    description: str
    render: Render
    arguments: Sequence[dict[str, Any]] = ()
    completions: dict[str, Sequence[str]] = field(default_factory=dict)

    def listing(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "title": self.title, "description": self.description}
        if self.arguments:
            entry["arguments"] = list(self.arguments)
        return entry


def argument(name: str, description: str, *, required: bool = False) -> dict[str, Any]:
    return {"name": name, "description": description, "required": required}


class DemoServer:
    def __init__(self, name: str, prompts: Sequence[DemoPrompt]) -> None:
        self.name = name
        self.prompts = {p.name: p for p in prompts}

    async def handle(self, request: Request, notify: Notify) -> dict[str, Any]:
        params = request.params or {}
        if request.method == "initialize":
            return {
                "protocolVersion": negotiate(params.get("protocolVersion")),
                "capabilities": {"prompts": {"listChanged": False}, "completions": {}},
                "serverInfo": {"name": self.name, "version": __version__},
            }
        if request.method == "ping":
            return {}
        if request.method == "prompts/list":
            return {"prompts": [p.listing() for p in self.prompts.values()]}
        if request.method == "prompts/get":
            prompt = self._prompt(params.get("name"))
            arguments = params.get("arguments") or {}
            text = prompt.render({k: str(v) for k, v in arguments.items()})
            return {
                "description": prompt.description,
                "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            }
        if request.method == "completion/complete":
            prompt = self._prompt((params.get("ref") or {}).get("name"))
            arg = params.get("argument") or {}
            values = [v for v in prompt.completions.get(arg.get("name", ""), ()) if v.startswith(arg.get("value", ""))]
            return {"completion": {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}}
        raise MethodNotFound(f"Method not found: {request.method}")

    def _prompt(self, name: object) -> DemoPrompt:
        if not isinstance(name, str) or name not in self.prompts:
            raise InvalidParams(f"Unknown prompt: {name}")
        return self.prompts[name]

    def run(self) -> None:
        configure_logging("warning")  # stdout carries the protocol: logs must go to stderr

        async def serve() -> None:
            await RpcPeer(open_own_stdio(), on_request=self.handle, answer_malformed=True).run()

        anyio.run(serve)
