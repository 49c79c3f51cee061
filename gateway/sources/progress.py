"""Progress relay: an upstream's ``notifications/progress`` back to the one client that asked for it.

A client's ``_meta.progressToken`` is only unique within its own session, so the gateway swaps it for
a token of its own while the request is with the upstream, and swaps it back on the way out. Tokens
of other clients are never seen by an upstream, and an upstream cannot address another client: the
gateway's tokens are unguessable, and a notification counts only when it comes from the upstream the
request went to (an upstream that saw one token cannot use it to reach a request routed elsewhere).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gateway.rpc import Notify

PROGRESS = "notifications/progress"


class ProgressRelay:
    def __init__(self) -> None:
        self._routes: dict[str, tuple[str, Notify, Any]] = {}

    @contextmanager
    def route(self, params: dict[str, Any], notify: Notify | None, *, upstream: str) -> Iterator[dict[str, Any]]:
        """``params`` as ``upstream`` should see them: the client's progress token replaced, if it sent one."""
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if notify is None or not isinstance(token, (str, int)) or isinstance(token, bool):
            yield params
            return
        ours = f"gw-progress-{secrets.token_urlsafe(16)}"
        self._routes[ours] = (upstream, notify, token)
        try:
            yield {**params, "_meta": {**meta, "progressToken": ours}}  # type: ignore[dict-item]
        finally:
            del self._routes[ours]

    async def deliver(self, upstream: str, params: dict[str, Any]) -> None:
        """Relay ``upstream``'s progress notification to the client whose request carries its token."""
        token = params.get("progressToken")
        route = self._routes.get(token) if isinstance(token, str) else None
        if route is not None and route[0] == upstream:
            _, notify, client_token = route
            await notify(PROGRESS, {**params, "progressToken": client_token})
