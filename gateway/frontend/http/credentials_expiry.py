"""A long-lived stream ends when the credentials that opened it stop being accepted.

Every request's access token is checked when it arrives, but an event stream (a handshake-era
session's GET stream, a legacy HTTP+SSE session's stream) is one request that can stay open for
hours: without this, a token that expired, or a person whose access was taken away at the provider,
would go on receiving the session's notifications for as long as the connection lasts. The stream
ends at the token's ``exp`` (with the leeway the gateway grants every token; for an introspected token
that states none, when the issuer would be asked again); a client that opens it again does so with the
token it has now, which is checked like any other request. Credentials that do not expire (static
tokens, the stdio client, anonymous loopback) leave a stream as it is, at no cost.

(A 2026-07-28 ``subscriptions/listen`` ends the same way, with its result, in ``Subscription``.)
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator

import anyio

from gateway.identity.principal import Identity, seconds_left


def until_credentials_expire(body: AsyncGenerator[bytes], principal: Identity | None) -> AsyncGenerator[bytes]:
    """``body``, ended once ``principal``'s credentials expire (``body`` itself where they never do)."""
    return ending_at(body, principal.valid_until if principal is not None else None)


def ending_at(body: AsyncGenerator[bytes], valid_until: float | None) -> AsyncGenerator[bytes]:
    """``body``, ended at ``valid_until`` (Unix time; ``body`` itself for None)."""
    left = seconds_left(valid_until, time.time())
    return body if left is None else _ending(body, anyio.current_time() + left)


async def _ending(body: AsyncGenerator[bytes], deadline: float) -> AsyncGenerator[bytes]:
    try:
        while anyio.current_time() < deadline:  # (an event ready at once would pass the scope below)
            chunk: bytes | None = None
            with anyio.move_on_at(deadline):  # no yield inside: the scope must not span one
                chunk = await anext(body, None)
                if chunk is None:
                    return
            if chunk is None:  # the credentials expired while it waited for the next event
                return
            yield chunk
    finally:
        await body.aclose()
