"""An aiohttp response's SSE body as events, parsed by httpx-sse: the upstream transports read their
answers with aiohttp, and httpx-sse reads bodies through httpx's response model, so the aiohttp body is
handed to it as one (no request is made by httpx)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import httpx
from httpx_sse import EventSource


def events_of(response: aiohttp.ClientResponse) -> EventSource:
    """A streamed (``text/event-stream``) answer's events."""
    headers = [(name, value) for name, value in response.headers.items()]
    return EventSource(httpx.Response(response.status, headers=headers, stream=_Body(response.content)))


class _Body(httpx.AsyncByteStream):
    def __init__(self, content: aiohttp.StreamReader) -> None:
        self._content = content

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._content.iter_any():
            yield chunk
