"""What replicas share through Redis (``[cluster] redis_url``): what a sealed session id cannot carry.

- An ended session: ``DELETE`` on one replica marks the id deleted in Redis until it would have expired
  anyway, and tells the others at once (pub/sub), so no replica resumes it or keeps serving it.
- A session's use: each replica records that a session is in use (at most every quarter of the idle
  time-out, the record living a quarter longer than it), so a session idle on one replica but in use
  on another goes on, and one idle everywhere is ended on every replica.
- A cancellation: a ``notifications/cancelled`` that reaches a replica not running that request is
  passed on to every replica; the one running it cancels it.
- A session's event stream (a legacy HTTP+SSE stream, a GET stream) lives on one replica, which records
  itself as the holder: a legacy POST reaching another replica is passed to the holder, and so is a
  request an upstream makes of the client (elicitation, sampling, roots) on another replica; the
  client's answer, POSTed wherever, goes back to the replica that asked (its id names it).
- Reloads: each replica records the config generation it runs with a heartbeat (``[cluster]
  heartbeat_s``) and publishes changes, so ``/readyz`` can say whether the replicas alive agree; a
  replica stopped or killed is forgotten once three heartbeats pass without it.
- An operator page signed out of: its sign-in's id is recorded until the cookie would have expired
  anyway, and every replica refuses that cookie from then on.
- The catalog's epoch: a count of list_changed fan-outs on any replica. Event ids carry it, so a client
  presenting a Last-Event-ID to another replica is told to list again only if a change came since.

Redis is an aid, never a dependency of serving: when it cannot be reached the gateway logs it once,
``/readyz`` says so in its body, what needs no Redis goes on (sealed ids still move between replicas),
and everything comes back when Redis does (the subscriber reconnects with backoff). Keys and messages
name sessions by a hash of their id, never by the id itself.

The Redis protocol is redis-py's (its asyncio client); nothing here speaks RESP.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import structlog

log = structlog.get_logger("gateway.cluster")

PREFIX = "prompt-gateway:"
BROADCAST = PREFIX + "all"
HOLD_S = 60
ALIVE_PREFIX = f"{PREFIX}alive:"
"""Each replica's heartbeat record (its config generation), living three heartbeats."""
"""A stream's holder record lives this long unless refreshed (a replica that died stops owning it)."""
RECONNECT_MAX_S = 10.0
REDIS_TIMEOUT_S = 2.0


_DELETE_IF_OURS = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def session_key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()[:32]


@dataclass
class ClusterHandlers:
    """What the front end does when another replica says something."""

    deleted: Callable[[str], None] = lambda key: None
    cancel: Callable[[str, Any], None] = lambda key, request_id: None
    legacy: Callable[[str, str | None, bytes], bool] = lambda key, principal, body: False
    ask: Callable[[str, bytes], None] = lambda key, frame: None
    answer: Callable[[str, bytes], None] = lambda key, body: None


@dataclass
class ClusterStatus:
    connected: bool = False
    error: str | None = None
    generations: dict[str, str] = field(default_factory=dict)


class NoCluster:
    """One gateway, or replicas sharing only session keys: nothing to tell anyone."""

    handlers = ClusterHandlers()
    replica = "local"

    async def run(self) -> None:
        await anyio.sleep_forever()

    async def deleted(self, session_id: str, expires: float) -> None:
        pass

    async def is_deleted(self, session_id: str) -> bool:
        return False

    async def active(self, session_id: str, ttl_s: float) -> None:
        pass

    async def is_active(self, session_id: str) -> bool | None:
        return None

    async def cancel(self, session_id: str, request_id: Any) -> None:
        pass

    async def hold_stream(self, session_id: str) -> None:
        pass

    async def release_stream(self, session_id: str) -> None:
        pass

    async def forward_legacy(self, session_id: str, principal: str | None, body: bytes) -> bool:
        return False

    async def ask_through_holder(self, session_id: str, frame: bytes) -> bool:
        return False

    async def answer_to(self, replica: str, session_id: str, body: bytes) -> bool:
        return False

    async def announce_generation(self, generation: str) -> None:
        pass

    async def catalog_changed(self) -> None:
        pass

    async def signed_out(self, sign_in: str, ttl_s: float) -> None:
        pass

    async def is_signed_out(self, sign_in: str) -> bool:
        return False

    def epoch(self) -> int | None:
        return None

    def status(self) -> dict[str, Any] | None:
        return None


class RedisCluster:
    def __init__(self, url: str, *, generation: str, heartbeat_s: float = 10.0) -> None:
        import redis.asyncio  # only a gateway with redis_url loads it
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialBackoff

        # A pooled connection to a Redis that restarted fails its next command: redis-py retries that on a
        # fresh connection (without it, the first command after a restart said "unavailable").
        self._redis = redis.asyncio.Redis.from_url(
            url,
            socket_timeout=REDIS_TIMEOUT_S,
            socket_connect_timeout=REDIS_TIMEOUT_S,
            decode_responses=False,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=2),
            retry_on_error=[redis.ConnectionError, redis.TimeoutError],
            health_check_interval=30,
        )
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError, TimeoutError)
        self.replica = secrets.token_hex(6)
        self.handlers = ClusterHandlers()
        self._status = ClusterStatus()
        self._agreed = True  # as last logged: an outage forgets the generations, not what was said of them
        self._generation = generation
        self._heartbeat_s = heartbeat_s
        self._held: set[str] = set()  # sessions whose event stream is here, by key
        self._epoch: int | None = None

    # ---- what the front end asks -------------------------------------------------------------

    async def deleted(self, session_id: str, expires: float) -> None:
        key = session_key(session_id)
        ttl = max(1, int(expires - time.time()) + 1)
        await self._quietly(lambda: self._redis.set(f"{PREFIX}deleted:{key}", b"1", ex=ttl))
        await self._publish(BROADCAST, {"t": "deleted", "s": key})

    async def is_deleted(self, session_id: str) -> bool:
        found = await self._quietly(lambda: self._redis.exists(f"{PREFIX}deleted:{session_key(session_id)}"))
        return bool(found)

    async def active(self, session_id: str, ttl_s: float) -> None:
        """The session is in use: its record of activity lives ``ttl_s`` from now."""
        key = f"{PREFIX}active:{session_key(session_id)}"
        await self._quietly(lambda: self._redis.set(key, b"1", ex=max(1, math.ceil(ttl_s))))

    async def is_active(self, session_id: str) -> bool | None:
        """Whether any replica used the session lately (its record lives); None while Redis cannot say."""
        found = await self._quietly(lambda: self._redis.exists(f"{PREFIX}active:{session_key(session_id)}"))
        return None if found is None else bool(found)

    async def cancel(self, session_id: str, request_id: Any) -> None:
        await self._publish(BROADCAST, {"t": "cancel", "s": session_key(session_id), "r": request_id})

    async def hold_stream(self, session_id: str) -> None:
        key = session_key(session_id)
        self._held.add(key)
        await self._quietly(lambda: self._redis.set(f"{PREFIX}stream:{key}", self.replica.encode(), ex=HOLD_S))

    async def release_stream(self, session_id: str) -> None:
        """The stream closed here: drop the holder record, unless another replica holds it by now (the
        client reconnected there first)."""
        key = session_key(session_id)
        self._held.discard(key)
        await self._quietly(lambda: self._redis.eval(_DELETE_IF_OURS, 1, f"{PREFIX}stream:{key}", self.replica))

    async def _to_holder(self, session_id: str, message: dict[str, Any]) -> bool:
        """Send to the replica holding the session's stream (not this one); False when none does."""
        holder = await self._quietly(lambda: self._redis.get(f"{PREFIX}stream:{session_key(session_id)}"))
        if not holder or _text(holder) == self.replica:
            return False
        return bool(await self._publish(f"{PREFIX}replica:{_text(holder)}", message))

    async def forward_legacy(self, session_id: str, principal: str | None, body: bytes) -> bool:
        """Pass a legacy POST to the replica holding the session's stream; False when none does."""
        message = {"t": "legacy", "s": session_key(session_id), "p": principal, "b": body.decode("utf-8", "replace")}
        return await self._to_holder(session_id, message)

    async def ask_through_holder(self, session_id: str, frame: bytes) -> bool:
        """Put a request for the client on its event stream, held by another replica; False when none does."""
        return await self._to_holder(session_id, {"t": "ask", "s": session_key(session_id), "b": frame.decode()})

    async def answer_to(self, replica: str, session_id: str, body: bytes) -> bool:
        """Hand a client's answer to the replica that asked it (named in the request id)."""
        message = {"t": "answer", "s": session_key(session_id), "b": body.decode("utf-8", "replace")}
        return bool(await self._publish(f"{PREFIX}replica:{replica}", message))

    async def announce_generation(self, generation: str) -> None:
        """Record the config this replica runs (at start and after each reload) and tell the others."""
        self._generation = generation
        await self._quietly(self._beat)
        await self._publish(BROADCAST, {"t": "generation", "s": self.replica})

    async def catalog_changed(self) -> None:
        """A list_changed fan-out is about to leave this replica: count it, before its events are numbered."""
        value = await self._quietly(lambda: self._redis.incr(f"{PREFIX}epoch"))
        if isinstance(value, int):
            self._epoch = max(self._epoch or 0, value)
            await self._publish(BROADCAST, {"t": "epoch", "s": str(value)})

    async def signed_out(self, sign_in: str, ttl_s: float) -> None:
        """An operator page's sign-in (its cookie's id) was signed out of: refused on every replica until
        the record lapses, when the cookie itself would have expired."""
        key = f"{PREFIX}signed-out:{session_key(sign_in)}"
        await self._quietly(lambda: self._redis.set(key, b"1", ex=max(1, math.ceil(ttl_s))))

    async def is_signed_out(self, sign_in: str) -> bool:
        found = await self._quietly(lambda: self._redis.exists(f"{PREFIX}signed-out:{session_key(sign_in)}"))
        return bool(found)

    def epoch(self) -> int | None:
        """The catalog's epoch as this replica knows it; None while Redis is not reachable."""
        return self._epoch if self._status.connected else None

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = {"redis": "connected" if self._status.connected else "unavailable"}
        if not self._status.connected:  # what was last heard of the others may no longer be so: not said
            if self._status.error is not None:
                status["redis_error"] = self._status.error
            return status
        if self._epoch is not None:
            status["catalog_epoch"] = self._epoch
        if self._status.generations:
            status["replica"] = self.replica  # which of config_generations answered (through a balancer)
            status["config_generations"] = dict(self._status.generations)
            status["replicas_agree"] = len(set(self._status.generations.values())) == 1
        return status

    # ---- the subscriber ------------------------------------------------------------------------

    async def run(self) -> None:
        """Listen to the other replicas until cancelled; reconnect with backoff whenever Redis is lost."""
        delay = 0.2
        while True:
            try:
                await self._listen()
            except self._errors as exc:
                if self._status.connected:
                    delay = 0.2  # it was up: back off afresh
                self._lost(exc)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                    if self._status.connected:  # leaving: the others forget this replica at once
                        with suppress(*self._errors):
                            await self._redis.delete(self._alive_key)
                    await self._redis.aclose()
                raise
            await anyio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_S)

    async def _listen(self) -> None:
        pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(BROADCAST, f"{PREFIX}replica:{self.replica}")
            self._epoch = int(await self._redis.get(f"{PREFIX}epoch") or 0)  # changes missed while away count
            self._found()
            await self.announce_generation(self._generation)
            refreshed = beaten = 0.0
            while True:
                message = await pubsub.get_message(timeout=min(1.0, self._heartbeat_s))
                if message is not None and self._handle(message.get("data")) == "generation":
                    beaten = 0.0  # a replica started or reloaded: learn its generation now
                if not self._status.connected:  # a command failed meanwhile: is Redis back (or still there)?
                    await self._redis.ping()
                    self._found()
                if time.monotonic() - refreshed > HOLD_S / 3:
                    await self._refresh()
                    refreshed = time.monotonic()
                if time.monotonic() - beaten > self._heartbeat_s:
                    await self._beat()
                    beaten = time.monotonic()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                await pubsub.aclose()  # type: ignore[no-untyped-call,unused-ignore]  # typed from redis 8.2

    async def _refresh(self) -> None:
        """Keep this replica's streams owned."""
        for key in list(self._held):
            await self._redis.set(f"{PREFIX}stream:{key}", self.replica.encode(), ex=HOLD_S)

    @property
    def _alive_key(self) -> str:
        return f"{ALIVE_PREFIX}{self.replica}"

    async def _beat(self) -> None:
        """Say this replica is alive and which config it runs, for three heartbeats; learn the same of
        every replica still alive (a replica killed or gone is forgotten once its record lapses)."""
        ttl = max(1, math.ceil(3 * self._heartbeat_s))
        await self._redis.set(self._alive_key, self._generation.encode(), ex=ttl)
        keys = [key async for key in self._redis.scan_iter(match=f"{ALIVE_PREFIX}*", count=1000)]
        values = await self._redis.mget(keys) if keys else []
        self._status.generations = {
            _text(key).removeprefix(ALIVE_PREFIX): _text(value)
            for key, value in zip(keys, values, strict=True)
            if value is not None
        }
        agree = len(set(self._status.generations.values())) <= 1
        if agree != self._agreed:  # said once when it begins and once when it ends: /readyz was easy to miss
            self._agreed = agree
            event = "replicas_agree" if agree else "replicas_disagree"
            (log.info if agree else log.warning)(event, config_generations=dict(self._status.generations))

    def _handle(self, data: Any) -> str | None:
        """Act on another replica's message; its kind."""
        try:
            message = json.loads(data)
            kind, key = str(message["t"]), str(message["s"])
        except (ValueError, KeyError, TypeError):
            return None  # not ours
        if kind == "deleted":
            self.handlers.deleted(key)
        elif kind == "cancel":
            self.handlers.cancel(key, message.get("r"))
        elif kind == "epoch" and key.isdigit():
            self._epoch = max(self._epoch or 0, int(key))
        elif kind == "legacy" and isinstance(message.get("b"), str):
            self.handlers.legacy(key, message.get("p"), message["b"].encode())
        elif kind == "ask" and isinstance(message.get("b"), str):
            self.handlers.ask(key, message["b"].encode())
        elif kind == "answer" and isinstance(message.get("b"), str):
            self.handlers.answer(key, message["b"].encode())
        return kind

    async def _publish(self, channel: str, message: dict[str, Any]) -> int:
        receivers = await self._quietly(lambda: self._redis.publish(channel, json.dumps(message).encode()))
        return int(receivers or 0)

    async def _quietly(self, command: Callable[[], Awaitable[Any]]) -> Any:
        """A Redis command whose failure costs only what it would have shared (logged once per outage).
        While Redis is known to be down, none is tried: no request waits out a connect time-out; the
        subscriber's reconnection is what finds it back."""
        if not self._status.connected:
            return None
        try:
            result = await command()
        except self._errors as exc:
            self._lost(exc)
            return None
        return result

    def _found(self) -> None:
        if not self._status.connected:
            log.info("redis_connected", replica=self.replica)
        self._status.connected, self._status.error = True, None

    def _lost(self, exc: BaseException) -> None:
        if self._status.connected or self._status.error is None:
            log.warning("redis_unavailable", error=str(exc) or type(exc).__name__, replica=self.replica)
        self._status.connected, self._status.error = False, str(exc) or type(exc).__name__
        self._status.generations = {}  # heard before the outage: said again only once heard after it
