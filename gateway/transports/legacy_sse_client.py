"""The legacy HTTP+SSE transport (2024-11-05) to an upstream: a GET stream whose first event names where
to POST, each frame POSTed there and the answers read from the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from urllib.parse import urljoin, urlsplit

import anyio
import httpx
from httpx_sse import ServerSentEvent

from gateway.transports.base import DEFAULT_MAX_MESSAGE_BYTES
from gateway.transports.client_credentials import TokenUnavailable, UpstreamToken
from gateway.transports.http_client import (
    UNAVAILABLE_STATUSES,
    HttpTransportError,
    _error_frame,
    _HttpStream,
    _request_id,
    _status_problem,
    _with_token,
)
from gateway.transports.http_options import HTTP_ERRORS, HttpOptions, describe, upstream_session
from gateway.transports.sse_bodies import events_of


class LegacySseStream(_HttpStream):
    async def _post(self, frame: bytes) -> None:
        request_id = _request_id(frame)
        try:
            async with await self._post_frame(frame, {"Content-Type": "application/json"}) as response:
                if response.status in UNAVAILABLE_STATUSES:
                    self._end(f"answered HTTP {response.status}")
                    return
                failed, reason, status = response.status >= 300, _status_problem(response), response.status
        except (*HTTP_ERRORS, TokenUnavailable) as exc:
            if self._unreachable(exc):
                return
            failed, reason, status = True, f"HTTP request failed: {describe(exc)}", None
        if failed and request_id is not None:
            await self._deliver(_error_frame(request_id, reason, status))

    async def pump(self, events: AsyncIterator[ServerSentEvent]) -> None:
        with suppress(*HTTP_ERRORS, httpx.HTTPError):
            async for event in events:
                if event.event == "message" and event.data:
                    await self._deliver(event.data.encode())
        self._end("closed its event stream")


@asynccontextmanager
async def open_legacy_sse(
    url: str,
    options: HttpOptions,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    token: UpstreamToken | None = None,
) -> AsyncIterator[LegacySseStream]:
    """Open the GET stream, wait for its ``endpoint`` event, and POST every frame there."""
    async with (
        upstream_session(url, options) as client,
        client.get(
            url, headers=await _with_token(token, {"Accept": "text/event-stream", "Cache-Control": "no-store"})
        ) as response,
    ):
        if response.status != 200:
            raise HttpTransportError(f"SSE endpoint answered HTTP {response.status}")
        events = events_of(response).aiter_sse()
        with anyio.fail_after(options.timeout_s):
            first = await events.__anext__()
        if first.event != "endpoint" or not first.data:
            raise HttpTransportError("the SSE stream did not start with an endpoint event")
        stream_url = str(response.url)  # where a redirect led
        endpoint = urljoin(stream_url, first.data)
        if urlsplit(endpoint)[:2] != urlsplit(stream_url)[:2]:
            raise HttpTransportError("the SSE endpoint event points at another origin")
        async with anyio.create_task_group() as tg:
            stream = LegacySseStream(client, endpoint, tg, max_message_bytes, token)
            tg.start_soon(stream.pump, events)
            try:
                yield stream
            finally:
                await stream.aclose()
                tg.cancel_scope.cancel()
