"""Section ``sessions``: ``list_changed`` fanned out from one upstream change to many HTTP sessions' GET
streams, and the gateway's memory per session.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
from anyio.streams.buffered import BufferedByteReceiveStream

from bench.clients import http_client
from bench.config import gateway_config, stdio_upstream
from bench.processes import (
    http_gateway,
    rss_kib,
)


async def bench_sessions(quick: bool) -> dict[str, Any]:
    """list_changed from one upstream change to N HTTP sessions' GET streams: when the first and the last
    session had it (after a 10 ms debounce), and memory per session."""
    return {"rows": [await sessions_row(count) for count in ((100,) if quick else (1000, 10_000))]}


async def sessions_row(sessions: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        config = gateway_config(Path(tmp) / "s.toml", {"up": stdio_upstream()}, http=True, list_changed_debounce_s=0.01)
        async with http_gateway(config) as (url, process):
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            base_rss = rss_kib(process.pid)
            ids = await open_sessions(url, sessions)
            streams = [await open_stream(port, session_id) for session_id in ids]
            for stream in streams:
                await read_until(stream, b"\r\n\r\n")  # response headers: the stream is open
            loaded_rss = rss_kib(process.pid)
            arrivals: list[float] = []
            async with http_client(url) as trigger:
                done = anyio.Event()

                async def wait_one(stream: Any) -> None:
                    await read_until(stream, b"list_changed")
                    arrivals.append(time.perf_counter())
                    if len(arrivals) == len(streams):
                        done.set()

                async with anyio.create_task_group() as tg:
                    for stream in streams:
                        tg.start_soon(wait_one, stream)
                    started = time.perf_counter()
                    await trigger.request("prompts/get", {"name": "up__touch"})
                    with anyio.fail_after(120):
                        await done.wait()
            for stream in streams:
                await stream.aclose()
    return {
        "sessions": sessions,
        "debounce_ms": 10,
        "first_session_ms": (min(arrivals) - started) * 1000,
        "last_session_ms": (max(arrivals) - started) * 1000,
        "rss_per_session_kib": (loaded_rss - base_rss) / sessions,
    }


async def open_sessions(url: str, count: int) -> list[str]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=32)) as http:
        ids = []
        for _ in range(count):
            response = await http.post(url, json=body, headers=headers)
            session_id = response.headers["mcp-session-id"]
            await http.post(
                url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers={**headers, "Mcp-Session-Id": session_id},
            )
            ids.append(session_id)
        return ids


async def open_stream(port: int, session_id: str) -> Any:
    connection = await anyio.connect_tcp("127.0.0.1", port)
    request = (
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
        f"Mcp-Session-Id: {session_id}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    )
    await connection.send(request.encode())
    return BufferedByteReceiveStream(connection)


async def read_until(stream: Any, marker: bytes) -> None:
    await stream.receive_until(marker, 1 << 20)
