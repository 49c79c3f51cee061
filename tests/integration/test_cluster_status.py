"""What ``/readyz`` says of the other replicas through a real Redis: replicas identical but for where
they listen agree; a replica killed (no goodbye) is forgotten after three heartbeats, one stopped at
once, so ``replicas_agree`` speaks of the replicas alive. Skipped with the reason where redis-server is
missing (``.ci/run`` installs it and requires it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.integration.helpers import RunningGateway, demo_upstream, running_gateway, write_config
from tests.integration.services import free_port, redis_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.services]
HEARTBEAT_S = 0.3


@asynccontextmanager
async def replica(tmp_path: Path, redis_url: str, deny: tuple[str, ...] = ()) -> AsyncIterator[RunningGateway]:
    """A replica on a port of its own (its config differs from the others' only there, and in ``deny``)."""
    port = free_port()
    config = write_config(
        tmp_path / f"replica-{port}.toml",
        [demo_upstream("writing", "writing")],
        server={"transport": "http", "port": port},
        cluster={
            "session_keys": ["a-session-key-of-32-characters!!"],
            "redis_url": redis_url,
            "heartbeat_s": HEARTBEAT_S,
        },
        policy={"deny": list(deny)},
    )
    async with running_gateway(config) as gateway:
        await gateway.wait_for_event("redis_connected")
        yield gateway


async def cluster_view(http: httpx.AsyncClient, gateway: RunningGateway) -> dict[str, Any]:
    return (await http.get(f"{gateway.url}/readyz")).json()["cluster"]  # type: ignore[no-any-return]


async def until_replicas(http: httpx.AsyncClient, gateway: RunningGateway, count: int) -> dict[str, Any]:
    """The view once it names ``count`` replicas (heartbeats are a time, not an event: asked again)."""
    with anyio.fail_after(10 + 3 * HEARTBEAT_S):
        while len((view := await cluster_view(http, gateway)).get("config_generations", {})) != count:
            await anyio.sleep(HEARTBEAT_S / 3)
    return view


async def test_readyz_speaks_of_the_replicas_alive_and_agrees_across_ports(tmp_path: Path) -> None:
    async with redis_server() as redis, httpx.AsyncClient(timeout=20) as http, replica(tmp_path, redis.url) as a:
        async with replica(tmp_path, redis.url) as b:
            view = await until_replicas(http, a, 2)
            assert view["replicas_agree"] is True  # the port was part of the digest: they never agreed
            b.process.kill()  # no goodbye
            await b.process.wait()
            view = await until_replicas(http, a, 1)
            assert view["replicas_agree"] is True
        async with replica(tmp_path, redis.url) as c:
            view = await until_replicas(http, a, 2)
            assert view["replicas_agree"] is True
            c.process.terminate()  # a clean stop says goodbye
            await c.process.wait()
            with anyio.fail_after(3 * HEARTBEAT_S + 2):
                await until_replicas(http, a, 1)


async def test_readyz_says_nothing_of_the_replicas_while_redis_is_down(tmp_path: Path) -> None:
    """Found in the session notes: with Redis gone, /readyz went on showing the replicas and their
    agreement as last heard, which may no longer be so."""
    async with (
        redis_server() as redis,
        httpx.AsyncClient(timeout=20) as http,
        replica(tmp_path, redis.url) as a,
        replica(tmp_path, redis.url),
    ):
        await until_replicas(http, a, 2)
        redis.process.kill()
        await a.wait_for_event("redis_unavailable")
        view = await cluster_view(http, a)
    assert view["redis"] == "unavailable"
    assert not {"replicas_agree", "config_generations", "catalog_epoch"} & set(view)


async def test_replicas_that_disagree_are_logged_and_readyz_names_who_answered(tmp_path: Path) -> None:
    """A tester behind HAProxy: ``replicas_agree: false`` showed only in /readyz (which still answers
    200, rightly: each replica serves), nothing was logged, and through the balancer /readyz did not say
    which replica had answered."""
    async with redis_server() as redis, httpx.AsyncClient(timeout=20) as http, replica(tmp_path, redis.url) as a:
        async with replica(tmp_path, redis.url, deny=("writing__translate",)) as b:
            told = await a.wait_for_event("replicas_disagree", timeout=10 + 3 * HEARTBEAT_S)
            assert len(set(told["config_generations"].values())) == 2
            view = await until_replicas(http, a, 2)
            assert view["replicas_agree"] is False
            assert view["replica"] in view["config_generations"]
            assert view["replica"] != (await cluster_view(http, b))["replica"]
        await a.wait_for_event("replicas_agree", timeout=10 + 3 * HEARTBEAT_S)  # b stopped: a alone agrees


async def test_a_disagreement_that_ends_during_a_redis_outage_is_said_to_have_ended(tmp_path: Path) -> None:
    """A reviewer: the end of a disagreement was judged against the replicas last heard, which an outage
    forgets, so one that ended while Redis was away was never said to have ended."""
    async with redis_server() as redis, replica(tmp_path, redis.url) as a:
        async with replica(tmp_path, redis.url, deny=("writing__translate",)):
            await a.wait_for_event("replicas_disagree", timeout=10 + 3 * HEARTBEAT_S)
            assert redis.process is not None
            redis.process.kill()
            await a.wait_for_event("redis_unavailable")
        async with redis_server(port=redis.port):  # back, empty: only a is heard
            await a.wait_for_event("redis_connected")
            await a.wait_for_event("replicas_agree", timeout=10 + 3 * HEARTBEAT_S)
