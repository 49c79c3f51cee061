"""Progress relay: an upstream's ``notifications/progress`` back to the one client that asked for it.

A client's ``_meta.progressToken`` is only unique within its own session, so the gateway swaps it for
a token of its own while the request is with the upstream, and swaps it back on the way out. Tokens
of other clients are never seen by an upstream, and an upstream cannot address another client.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gateway.rpc import Notify

PROGRESS = "notifications/progress"


class ProgressRelay:
    def __init__(self) -> None:
        self._routes: dict[str, tuple[Notify, Any]] = {}
        self._ids = itertools.count(1)

    @contextmanager
    def route(self, params: dict[str, Any], notify: Notify | None) -> Iterator[dict[str, Any]]:
        """``params`` as the upstream should see them: the client's progress token replaced, if it sent one."""
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if notify is None or not isinstance(token, (str, int)) or isinstance(token, bool):
            yield params
            return
        ours = f"gw-progress-{next(self._ids)}"
        self._routes[ours] = (notify, token)
        try:
            yield {**params, "_meta": {**meta, "progressToken": ours}}  # type: ignore[dict-item]
        finally:
            del self._routes[ours]

    async def deliver(self, params: dict[str, Any]) -> None:
        route = self._routes.get(params.get("progressToken"))  # type: ignore[arg-type]
        if route is not None:
            notify, token = route
            await notify(PROGRESS, {**params, "progressToken": token})
