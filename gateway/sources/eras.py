"""The era a connection speaks, learnt as it opens: the ``server/discover`` probe (with a ``ping`` behind it
for stdio servers), the handshake beside or after it, and what each outcome means (a modern server, a
handshake-era one, one that died of the probe and is restarted for the handshake only, one that is no
prompt server). Protocol logic over one RpcPeer: it opens nothing itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any, Protocol, runtime_checkable

import anyio
from anyio.abc import TaskGroup
from pydantic import ValidationError

from gateway.config import HttpUpstream, StdioUpstream
from gateway.protocol.errors import (
    UNSUPPORTED_PROTOCOL_VERSION,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from gateway.protocol.models import DiscoverResult, InitializeResult, describe
from gateway.protocol.modern import SERVER_INFO_KEY, with_envelope
from gateway.protocol.skills import declares_extension
from gateway.protocol.versions import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
)
from gateway.rpc import PeerClosed, RemoteError, RequestTimeout, RpcPeer, UnusableAnswer
from gateway.sources.client_requests import ADVERTISED_TO_UPSTREAMS
from gateway.sources.upstream_options import CLIENT_INFO, http_status
from gateway.transports.base import MessageStream

PING_GRACE_S = 0.25
"""How long the probe is still waited for once the ping behind it has answered: a server that speaks both
eras and answers concurrently may answer the ping first, and timing must not choose its era."""
PROBE_PATIENCE_S = 10.0
"""How long the ``server/discover`` probe is waited for alone before the handshake is tried beside it (a
server that ignores requests before ``initialize`` never answers: the spec's legacy server). The probe
itself stays pending for the upstream's whole ``timeout_s``: an answer that comes late still counts."""


@runtime_checkable
class VersionedStream(Protocol):
    """A transport that must repeat the negotiated revision on every message (HTTP's header)."""

    def set_protocol_version(self, version: str | None) -> None: ...


def _set_version(stream: MessageStream, version: str | None) -> None:
    if isinstance(stream, VersionedStream):
        stream.set_protocol_version(version)


async def _first_of(*events: anyio.Event) -> None:
    """Until one of the events is set."""
    async with anyio.create_task_group() as tg:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(wait, event)


class HandshakeFailed(Exception):
    """The server answered, but not as a prompt server we can use: retrying will not help."""


class DiedOnProbe(UpstreamUnavailable):
    """The server exited on the ``server/discover`` probe or right after it, as Python SDK servers up to
    mcp 1.8.1 do (a validation error ends their stdio loop): restarted at once, spoken to with the
    handshake only from then on."""


class _ModernOnly(Exception):
    """``initialize`` was refused with the modern revisions' unsupported-version error."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message")))
        self.error = error


class _Probe:
    """The ``server/discover`` probe running beside the handshake: its outcome, once it has one."""

    def __init__(self) -> None:
        self.settled = anyio.Event()
        self._outcome: DiscoverResult | BaseException | None = None

    async def run(self, discover: Callable[[], Awaitable[DiscoverResult | None]]) -> None:
        try:
            self._outcome = await discover()
        except (HandshakeFailed, UpstreamError) as exc:
            self._outcome = exc
        self.settled.set()

    def result(self) -> DiscoverResult | None:
        """The DiscoverResult, None for a legacy server; what the probe raised is raised here."""
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome


class EraNegotiation:
    """How a connection learns which era its server speaks (``protocol = "auto"``: probe with
    ``server/discover``; a DiscoverResult means 2026-07-28, any other answer or none means a
    handshake-era server, which gets ``initialize``), insisting on the ``prompts`` capability (or, with
    ``relay_skills``, the Skills extension). Mixed into
    the connector, whose state it reads and sets."""

    settings: StdioUpstream | HttpUpstream
    namespace: str
    protocol_version: str | None
    capabilities: dict[str, Any]
    server_info: dict[str, Any]
    _handshake_only: bool
    _guessed_handshake_only: bool
    _probe_suspected: bool
    _probe_cleared: bool
    probe_outcome: str | None
    _connection_tasks: TaskGroup | None
    _stream: MessageStream | None

    def _exited(self, phase: str, *, verb: str = "exited") -> str:
        raise NotImplementedError

    def _check_offers(self, capabilities: dict[str, Any]) -> None:
        """HandshakeFailed unless the server offers something the gateway serves: prompts, or, with
        ``relay_skills``, the Skills extension (a server of skills alone has no prompts to offer)."""
        if isinstance(capabilities.get("prompts"), dict):
            return
        if self.settings.relay_skills and declares_extension(capabilities):
            return
        if self.settings.relay_skills:
            raise HandshakeFailed("offers neither the prompts capability nor the Skills extension")
        raise HandshakeFailed("does not offer the prompts capability")

    def _raise_if_unreachable(self, exc: PeerClosed) -> None:
        raise NotImplementedError

    async def _establish(self, peer: RpcPeer, stream: MessageStream) -> None:
        """Speak the server's era: 2026-07-28 when it answers discovery, else the handshake. In ``auto``
        the probe gets ``PROBE_PATIENCE_S`` alone; then the handshake is tried beside it, and a probe
        answer that still comes (a busy server, or one that refuses ``initialize`` as modern-only) wins."""
        settings = self.settings
        self.probe_outcome = None
        mode = "legacy" if isinstance(settings, HttpUpstream) and settings.transport == "sse" else settings.protocol
        if mode == "legacy" or self._handshake_only:
            await self._handshake(peer, probed=False)
            _set_version(stream, self.protocol_version)
            return
        _set_version(stream, LATEST_MODERN_VERSION)
        if mode == "modern":
            self._use_discovered(await self._discover(peer, required=True))
            return
        probe = _Probe()
        failure: HandshakeFailed | UpstreamError | None = None
        discovered: DiscoverResult | None = None
        async with anyio.create_task_group() as tg:  # nothing raised inside: a task group would wrap it
            tg.start_soon(probe.run, lambda: self._discover(peer, required=False))
            try:
                discovered = await self._probe_or_handshake(peer, stream, probe)
            except (HandshakeFailed, UpstreamError) as exc:
                failure = exc
            finally:
                tg.cancel_scope.cancel()  # settled one way or the other: the probe's answer no longer matters
        if failure is not None:
            raise failure
        if discovered is not None:
            self._use_discovered(discovered)
        else:
            _set_version(stream, self.protocol_version)

    async def _probe_or_handshake(self, peer: RpcPeer, stream: MessageStream, probe: _Probe) -> DiscoverResult | None:
        """The DiscoverResult of a modern server, or None once the handshake is done. A server that prints
        a ``ping`` behind the probe either answers (a handshake-era server: on at once) or makes a server that
        crashed on the probe but reads on (mcp <= 1.8.1) exit at once, not after the probe's patience."""
        pinged = anyio.Event()
        if isinstance(self.settings, StdioUpstream) and self._connection_tasks is not None:
            self._connection_tasks.start_soon(self._ping_beside_probe, peer, pinged)  # left to end by itself
        with anyio.move_on_after(min(PROBE_PATIENCE_S, self.settings.timeout_s)):
            await _first_of(probe.settled, pinged)
        if pinged.is_set() and not probe.settled.is_set():  # a server answering both may answer the ping first
            with anyio.move_on_after(PING_GRACE_S):
                await probe.settled.wait()
        if probe.settled.is_set():
            discovered = probe.result()
            if discovered is not None:
                return discovered
        else:
            self.probe_outcome = "handshake: server/discover not answered yet"
        _set_version(stream, None)
        try:
            await self._handshake(peer, probed=True)
        except _ModernOnly:
            await probe.settled.wait()  # the probe has the rest of timeout_s
            discovered = probe.result()
            if discovered is None:  # it said it is modern: a server too busy starting to answer in time
                _set_version(stream, LATEST_MODERN_VERSION)
                discovered = await self._discover(peer, required=True)  # asked again, on the same connection
            return discovered
        return None

    async def _ping_beside_probe(self, peer: RpcPeer, pinged: anyio.Event) -> None:
        """A ``ping`` right behind the probe: a handshake-era server that ignores the probe but answers it
        is known at once (no patience waited out), and a server that crashed on the probe but reads on
        (mcp <= 1.8.1 exits at its next line) exits now, not at the handshake ten seconds later.

        It carries the probe's envelope: the TypeScript SDK 2.x ``serveStdio`` pins a connection's era on
        the first request after ``server/discover``, and a bare ``ping`` pinned a modern server to the
        handshake era (its ``subscriptions/listen`` then refused as an unknown method). A handshake-era
        server reads the envelope as the ``_meta`` any request may carry."""
        params = with_envelope(None, version=LATEST_MODERN_VERSION, client_info=CLIENT_INFO)
        with suppress(RemoteError, RequestTimeout, UnusableAnswer, PeerClosed):
            await peer.request("ping", params, timeout=self.settings.timeout_s)
            pinged.set()

    def _use_discovered(self, discovered: DiscoverResult | None) -> None:
        if discovered is None:  # only for a required probe, which raises instead
            raise HandshakeFailed("did not answer server/discover")
        self.protocol_version = LATEST_MODERN_VERSION
        self.capabilities = discovered.capabilities
        meta = discovered.model_extra.get("_meta") if discovered.model_extra else None
        info = meta.get(SERVER_INFO_KEY) if isinstance(meta, dict) else None
        self.server_info = info if isinstance(info, dict) else {}
        self._check_offers(self.capabilities)

    async def _discover(self, peer: RpcPeer, *, required: bool) -> DiscoverResult | None:
        """The server's DiscoverResult when it speaks a modern revision we speak. Unless ``required``,
        None for any other answer, at once, as the official SDK's client decides: an HTTP error status, a
        JSON-RPC error, a body that is not JSON-RPC or not a DiscoverResult, or silence (a handshake-era
        server: git-mcp-server answers the probe with HTTP 500, and was retried for ever). Only a
        -32022 listing no revision we speak in either era is an answer that ends it."""
        params = with_envelope(None, version=LATEST_MODERN_VERSION, client_info=CLIENT_INFO)
        try:
            raw = await peer.request("server/discover", params, timeout=self.settings.timeout_s)
        except UnusableAnswer as exc:
            if not required:
                return self._refused(f"answered unusably: {exc.problem}")
            raise UpstreamProtocolError(self.namespace, f"answered server/discover unusably: {exc.problem}") from exc
        except RemoteError as exc:
            status = http_status(exc)
            code, data = exc.error.get("code"), exc.error.get("data")
            supported = data.get("supported") if isinstance(data, dict) else None
            if code == UNSUPPORTED_PROTOCOL_VERSION and isinstance(supported, list):
                if not required and any(v in HANDSHAKE_VERSIONS for v in supported):
                    return self._refused(f"it speaks {supported}")
                raise HandshakeFailed(f"speaks only protocol revisions {supported}, none of which we speak") from exc
            if not required:
                return self._refused(f"HTTP {status}" if status is not None else f"error {code}")
            if status is not None:
                raise UpstreamUnavailable(self.namespace, f"answered server/discover with HTTP {status}") from exc
            raise HandshakeFailed(f"refused server/discover: {exc.error.get('message')}") from exc
        except PeerClosed as exc:
            self._raise_if_unreachable(exc)
            if required:
                raise UpstreamUnavailable(self.namespace, self._exited("during discovery")) from exc
            if self._probe_cleared:
                # It died without the probe too since it last served: said as a crash (with backoff). Its next
                # starts are without the probe all the same (one that does die of it is served then), and
                # nothing is remembered of it: a modern server is probed again when it refuses the handshake.
                self._handshake_only = self._guessed_handshake_only = True
                raise UpstreamUnavailable(self.namespace, self._exited("while starting")) from exc
            self._handshake_only = self._guessed_handshake_only = self._probe_suspected = True
            raise DiedOnProbe(
                self.namespace, self._exited("on the server/discover probe") + "; restarting it for the handshake only"
            ) from exc
        except RequestTimeout as exc:
            if required:
                raise UpstreamTimeout(self.namespace, "did not answer server/discover") from exc
            return self._refused("no answer")
        try:
            result = DiscoverResult.model_validate(raw)
        except ValidationError as exc:
            if not required:
                return self._refused(f"not a DiscoverResult: {describe(exc)}")
            raise HandshakeFailed(f"sent an invalid server/discover result: {describe(exc)}") from exc
        if LATEST_MODERN_VERSION in result.supportedVersions:
            return result
        if required:
            raise HandshakeFailed(f"supports only {result.supportedVersions}, not {LATEST_MODERN_VERSION}")
        return self._refused(f"it supports {result.supportedVersions}")  # a legacy advertisement

    def _refused(self, why: str) -> DiscoverResult | None:
        """None: the probe's answer says a handshake-era server (noted for the ready log, with why)."""
        self.probe_outcome = f"handshake: server/discover {why}"
        return None

    async def _handshake(self, peer: RpcPeer, *, probed: bool) -> None:
        """``probed``: the probe went first on this connection, and a server that dies now died of it."""
        params = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": ADVERTISED_TO_UPSTREAMS,
            "clientInfo": CLIENT_INFO,
        }
        try:
            raw = await peer.request("initialize", params, timeout=self.settings.timeout_s)
        except UnusableAnswer as exc:
            raise UpstreamProtocolError(self.namespace, f"answered initialize unusably: {exc.problem}") from exc
        except RemoteError as exc:
            if exc.error.get("code") == UNSUPPORTED_PROTOCOL_VERSION and probed:
                raise _ModernOnly(exc.error) from exc  # modern after all: the probe's answer decides
            if exc.error.get("code") == UNSUPPORTED_PROTOCOL_VERSION and self._guessed_handshake_only:
                self._handshake_only = self._guessed_handshake_only = self._probe_suspected = False  # wrong guess
                raise UpstreamUnavailable(self.namespace, "is modern after all: probing it again") from exc
            status = http_status(exc)
            if status is not None:  # the server (or a proxy) is not there yet: tried again with backoff
                raise UpstreamUnavailable(self.namespace, f"answered initialize with HTTP {status}") from exc
            raise HandshakeFailed(f"refused initialize: {exc.error.get('message')}") from exc
        except PeerClosed as exc:
            self._raise_if_unreachable(exc)
            if probed and not self._handshake_only:
                self._handshake_only = self._guessed_handshake_only = True
                message = self._exited("during initialize, after the server/discover probe")
                if self._probe_cleared:  # (as in _discover: a crash, its next starts without the probe)
                    raise UpstreamUnavailable(self.namespace, message) from exc
                self._probe_suspected = True
                raise DiedOnProbe(self.namespace, message + "; restarting it for the handshake only") from exc
            if self._probe_suspected:  # it dies without the probe as well: the probe was not why
                self._handshake_only = self._guessed_handshake_only = self._probe_suspected = False
                self._probe_cleared = True  # (its next deaths, until it serves, are not blamed on the probe)
                message = self._exited("during initialize") + " (without the server/discover probe too)"
                raise UpstreamUnavailable(self.namespace, message) from exc
            raise UpstreamUnavailable(self.namespace, self._exited("during initialize")) from exc
        except RequestTimeout as exc:
            raise UpstreamTimeout(self.namespace, "did not answer initialize") from exc
        try:
            result = InitializeResult.model_validate(raw)
        except ValidationError as exc:
            raise HandshakeFailed(f"sent an invalid initialize result: {describe(exc)}") from exc
        if result.protocolVersion not in HANDSHAKE_VERSIONS:
            raise HandshakeFailed(f"answered with unsupported protocol revision {result.protocolVersion!r}")
        self._check_offers(result.capabilities)
        self.protocol_version = result.protocolVersion
        self.capabilities = result.capabilities
        self.server_info = result.serverInfo or {}
        try:
            await peer.notify("notifications/initialized")
        except PeerClosed as exc:
            raise UpstreamUnavailable(self.namespace, "exited during initialize") from exc
