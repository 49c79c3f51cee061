"""Progress relay: an upstream's ``notifications/progress`` back to the one client that asked for it.

A client's ``_meta.progressToken`` is only unique within its own session, so the gateway swaps it for
a token of its own while the request is with the upstream, and swaps it back on the way out. Tokens
of other clients are never seen by an upstream, and an upstream cannot address another client: the
gateway's tokens are unguessable, and a notification counts only when it comes from the upstream the
request went to (an upstream that saw one token cannot use it to reach a request routed elsewhere).
"""

from __future__ import annotations

import secrets
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import Any

from gateway.rpc import Notify

PROGRESS = "notifications/progress"


class ProgressRelay:
    def __init__(self) -> None:
        self._routes: dict[str, tuple[str, Notify, Any]] = {}

    def route(
        self, params: dict[str, Any], notify: Notify | None, *, upstream: str
    ) -> AbstractContextManager[dict[str, Any]]:
        """``params`` as ``upstream`` should see them: the client's progress token replaced, if it sent one.
        Plain context managers: a generator-based one cost more than the rest of this, per request."""
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if notify is None or not isinstance(token, (str, int)) or isinstance(token, bool):
            return nullcontext(params)
        return _Route(self._routes, params, (upstream, notify, token))

    async def deliver(self, upstream: str, params: dict[str, Any]) -> None:
        """Relay ``upstream``'s progress notification to the client whose request carries its token."""
        token = params.get("progressToken")
        route = self._routes.get(token) if isinstance(token, str) else None
        if route is not None and route[0] == upstream:
            _, notify, client_token = route
            await notify(PROGRESS, {**params, "progressToken": client_token})


class _Route:
    """One request's progress token, swapped for one of the gateway's while the request is upstream."""

    __slots__ = ("_ours", "_params", "_route", "_routes")

    def __init__(
        self, routes: dict[str, tuple[str, Notify, Any]], params: dict[str, Any], route: tuple[str, Notify, Any]
    ) -> None:
        self._routes, self._params, self._route = routes, params, route
        self._ours = f"gw-progress-{secrets.token_urlsafe(16)}"

    def __enter__(self) -> dict[str, Any]:
        self._routes[self._ours] = self._route
        return {**self._params, "_meta": {**self._params["_meta"], "progressToken": self._ours}}

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: TracebackType | None) -> None:
        del self._routes[self._ours]
