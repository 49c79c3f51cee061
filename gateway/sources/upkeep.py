"""Keeping a connection honest once it is up: a 2026-07-28 server's ``subscriptions/listen`` stream held
open (re-opened when the server ends it), and a remote server, or a stdio server whose first process
exited with its output still open, asked every ``HEALTH_CHECK_S`` whether it is still there. Mixed
into the connector.
"""

from __future__ import annotations

from typing import Any

import anyio

from gateway.config import HttpUpstream, StdioUpstream
from gateway.protocol.lists import EVERY_LIST, OnChange
from gateway.rpc import PeerClosed, RemoteError, RequestTimeout, RpcPeer, UnusableAnswer
from gateway.sources.backoff import Backoff
from gateway.sources.upstream_options import http_status

HEALTH_CHECK_S = 5.0
"""How often a remote upstream is asked whether it is still there."""


class ConnectionUpkeep:
    """The listen stream and the health check of one connection; the connector's state they read and set."""

    settings: StdioUpstream | HttpUpstream
    namespace: str
    _listening: bool
    _listening_skills: bool
    _listen_scope: anyio.CancelScope | None
    _drop_reason: str | None
    _output_held: anyio.Event
    _log: Any
    _on_change: OnChange

    @property
    def modern(self) -> bool:
        raise NotImplementedError

    @property
    def declares_list_changed(self) -> bool:
        raise NotImplementedError

    @property
    def declares_resource_changes(self) -> bool:
        raise NotImplementedError

    def _for_server(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        raise NotImplementedError

    async def _check_health(self, peer: RpcPeer) -> None:
        """A remote server can go away without a word (no process to watch, a GET stream it may not
        offer): asked every ``HEALTH_CHECK_S`` whether it is there (``ping``; ``server/discover`` for a
        2026-07-28 server, which has no ping). No answer in time, or no server: the connection is
        dropped, the upstream reported down and reconnected with backoff."""
        while not peer.closed:
            await anyio.sleep(HEALTH_CHECK_S)
            if not await self._answers(peer):
                return

    async def _check_when_held(self, peer: RpcPeer) -> None:
        """A stdio server's first process exited and its output did not end: a daemon it started holds
        a copy (the server is gone: it does not answer, and the connection is dropped), or it daemonized
        and serves on (it answers, and is asked again as a remote server is). Neither is assumed: a
        tester's server stayed "ready" for good, and a reviewer's daemonizing one was cut at once."""
        await self._output_held.wait()
        self._log.info("upstream_output_held", detail="its first process exited; asked whether it serves on")
        if await self._answers(peer):
            self._log.info("upstream_serves_on", detail="its first process exited, and it answers")
            await self._check_health(peer)

    async def _answers(self, peer: RpcPeer) -> bool:
        """Whether the server answers ``ping`` (``server/discover``, 2026-07-28) in time; if not, the
        connection is dropped, saying why."""
        method = "server/discover" if self.modern else "ping"
        try:
            await peer.request(method, self._for_server(None), timeout=min(self.settings.timeout_s, HEALTH_CHECK_S))
        except RemoteError as exc:
            if http_status(exc) is None:
                return True  # it answered: it is there
            self._drop_reason = f"answered {method} with HTTP {http_status(exc)}"
            await peer.aclose()
            return False
        except (RequestTimeout, UnusableAnswer):
            self._drop_reason = f"did not answer {method} within {min(self.settings.timeout_s, HEALTH_CHECK_S)}s"
            self._log.warning("upstream_unresponsive", method=method)
            await peer.aclose()
            return False
        except PeerClosed:
            return False
        return True

    async def _listen(self, peer: RpcPeer) -> None:
        """Hold a ``subscriptions/listen`` stream open for prompt list changes, re-opening it when the server
        ends it; while it is down, the catalog does not cache this server's pages without a TTL."""
        retry = Backoff(initial_s=1.0, max_s=30.0)
        wanted = {"promptsListChanged": True} if self.declares_list_changed else {}
        if self.declares_resource_changes:  # a relayed upstream's skills are resources (docs/skills.md)
            wanted["resourcesListChanged"] = True
        params = {"notifications": wanted}
        while not peer.closed:
            try:
                with anyio.CancelScope() as self._listen_scope:
                    await peer.request("subscriptions/listen", self._for_server(params), timeout=None)
                self._log.info("upstream_listen_ended")
            except RemoteError as exc:
                self._log.warning("upstream_listen_refused", error=exc.error.get("message"))
            except PeerClosed:
                return
            finally:
                self._listen_scope = None
                if self._listening or self._listening_skills:  # it was up: a new drop, not one more failure
                    self._listening = self._listening_skills = False
                    retry.reset()
                    self._on_change(self.namespace, EVERY_LIST)  # changes may now go unannounced: stop caching
            await anyio.sleep(retry.next_delay() or retry.max_s)
