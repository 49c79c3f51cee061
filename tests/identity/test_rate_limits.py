"""Which limits a request counts against, and what happens over one: typed identities counted apart,
a token's and a view's own rates, per-method rates, the global bound; Redis gone means each replica
counts alone, at once, never a request waiting on it."""

from __future__ import annotations

import sys

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from gateway.config import ClaimMatch, LimitsSettings, PolicyRules, TokenSettings, ViewSettings, parse_config
from gateway.identity.principal import LOCAL, Identity
from gateway.identity.rate_limits import Counts, RateLimits, retry_after_header
from gateway.protocol.errors import RATE_LIMITED, ConfigError, RateLimited
from tests.integration.services import free_port, redis_server

CI_TOKEN = Identity.token("ci")
CI_PERSON = Identity.access_token("https://idp.example", "ci", {"groups": ["staff"]})
CONTRACTOR = Identity.access_token("https://idp.example", "cora", {"groups": ["contractors"]})


def limits(settings: LimitsSettings, **extra: object) -> RateLimits:
    return RateLimits(settings, Counts(None, 0.25), **extra)  # type: ignore[arg-type]


async def admitted(rate_limits: RateLimits, who: Identity | None, method: str, times: int) -> int:
    """How many of ``times`` requests in a row were let through."""
    through = 0
    for _ in range(times):
        try:
            await rate_limits.admit(who, method)
            through += 1
        except RateLimited:
            pass
    return through


@pytest.mark.anyio
async def test_each_identity_has_its_own_rate_and_a_token_is_not_a_subject_of_the_same_name() -> None:
    rate_limits = limits(LimitsSettings(rate="3/minute"))
    assert await admitted(rate_limits, CI_TOKEN, "prompts/get", 5) == 3
    assert await admitted(rate_limits, CI_PERSON, "prompts/get", 5) == 3  # "ci" the person: counted apart
    assert await admitted(rate_limits, LOCAL, "prompts/list", 2) == 2
    assert await admitted(rate_limits, None, "prompts/list", 4) == 3  # unauthenticated callers: one identity


@pytest.mark.anyio
async def test_over_the_limit_says_which_and_when_to_come_back() -> None:
    rate_limits = limits(LimitsSettings(rate="1/minute"))
    await rate_limits.admit(CI_TOKEN, "prompts/get")
    with pytest.raises(RateLimited) as refused:
        await rate_limits.admit(CI_TOKEN, "prompts/get")
    error = refused.value.to_error_object()
    assert error["code"] == RATE_LIMITED == -32029
    assert error["data"]["limit"] == "rate"
    assert 0 < error["data"]["retryAfterMs"] <= 60_000
    assert retry_after_header(refused.value.retry_after_s) in {str(s) for s in range(1, 61)}


@pytest.mark.anyio
async def test_burst_methods_and_the_global_bound_hold_on_top() -> None:
    settings = LimitsSettings(rate="100/minute", burst="4/minute", methods={"prompts/get": "2/minute"})
    rate_limits = limits(settings)
    assert await admitted(rate_limits, CI_TOKEN, "prompts/get", 3) == 2  # the method's own rate
    # the burst counts every request of the identity, the one its method's rate refused too: 4 in all
    assert await admitted(rate_limits, CI_TOKEN, "prompts/list", 5) == 1
    shared = limits(LimitsSettings(global_rate="5/minute"))
    assert await admitted(shared, CI_TOKEN, "prompts/get", 3) == 3
    assert await admitted(shared, CI_PERSON, "prompts/get", 3) == 2  # what everyone shares is spent


@pytest.mark.anyio
async def test_an_identity_refused_by_its_own_limit_does_not_spend_the_global_bound() -> None:
    rate_limits = limits(LimitsSettings(rate="1/minute", global_rate="3/minute"))
    assert await admitted(rate_limits, CI_TOKEN, "prompts/get", 50) == 1
    assert await admitted(rate_limits, CI_PERSON, "prompts/get", 1) == 1
    assert await admitted(rate_limits, LOCAL, "prompts/get", 1) == 1


@pytest.mark.anyio
async def test_a_tokens_and_a_views_own_rate_take_the_place_of_the_default() -> None:
    token = TokenSettings(name="ci", token="x" * 16, rate="5/minute")
    view = ViewSettings(
        name="contractors",
        match=ClaimMatch(claim="groups", any_of=("contractors",)),
        policy=PolicyRules(),
        rate="1/minute",
    )
    rate_limits = limits(LimitsSettings(rate="2/minute"), tokens=[token], views=[view])
    assert await admitted(rate_limits, CI_TOKEN, "prompts/get", 9) == 5
    assert await admitted(rate_limits, CONTRACTOR, "prompts/get", 9) == 1
    assert await admitted(rate_limits, CI_PERSON, "prompts/get", 9) == 2  # no view of its own: the default


@pytest.mark.anyio
async def test_the_counts_outlive_new_limits() -> None:
    counts = Counts(None, 0.25)
    first = RateLimits(LimitsSettings(rate="2/minute"), counts)
    assert await admitted(first, CI_TOKEN, "prompts/get", 2) == 2
    reloaded = RateLimits(LimitsSettings(rate="2/minute", burst="10/second"), counts)  # a reload
    assert await admitted(reloaded, CI_TOKEN, "prompts/get", 1) == 0


STRATEGIES = ["moving-window", "sliding-window-counter", "fixed-window"]


async def spent_then_reloaded(counts: Counts, strategy: str, before: str, after: str, spent: int) -> int:
    """How many requests a reload from rate ``before`` to ``after`` still lets through, ``spent`` having
    been let through before it."""
    first = RateLimits(LimitsSettings(rate=before, strategy=strategy, storage_timeout_s=5), counts)  # type: ignore[arg-type]
    assert await admitted(first, CI_TOKEN, "prompts/get", spent) == spent
    reloaded = RateLimits(LimitsSettings(rate=after, strategy=strategy, storage_timeout_s=5), counts)  # type: ignore[arg-type]
    return await admitted(reloaded, CI_TOKEN, "prompts/get", 10)


@pytest.mark.anyio
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_changed_amount_applies_to_the_counts_so_far_in_memory(strategy: str) -> None:
    """The library keys its counts by the amount too: a reload to 3/minute counted everyone afresh."""
    assert await spent_then_reloaded(Counts(None, 5), strategy, "2/minute", "3/minute", spent=2) == 1
    assert await spent_then_reloaded(Counts(None, 5), strategy, "5/minute", "2/minute", spent=3) == 0


@pytest.mark.anyio
@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_changed_amount_applies_to_the_counts_so_far_in_redis(strategy: str) -> None:
    async with redis_server() as redis:
        counts, other = Counts(redis.url, 5), Counts(redis.url, 5)
        try:
            assert await spent_then_reloaded(counts, strategy, "2/minute", "3/minute", spent=2) == 1
            assert counts.usable_redis() is not None  # counted in Redis, not in memory after a failure
            elsewhere = RateLimits(LimitsSettings(rate="3/minute", strategy=strategy), other)  # type: ignore[arg-type]
            assert await admitted(elsewhere, CI_TOKEN, "prompts/get", 1) == 0  # another replica: the same counts
        finally:
            await counts.aclose()
            await other.aclose()


@pytest.mark.anyio
async def test_a_changed_window_starts_that_limits_counts_afresh() -> None:
    assert await spent_then_reloaded(Counts(None, 5), "moving-window", "2/minute", "2/hour", spent=2) == 2


@pytest.mark.anyio
async def test_two_amounts_of_one_window_count_each_request_once() -> None:
    assert await admitted(limits(LimitsSettings(rate="4/minute;6/minute")), CI_TOKEN, "prompts/get", 9) == 4


@pytest.mark.anyio
async def test_with_redis_gone_each_replica_counts_alone_at_once() -> None:
    nobody_listens = f"redis://127.0.0.1:{free_port()}/0"
    counts = Counts(nobody_listens, 0.2)
    rate_limits = RateLimits(LimitsSettings(rate="2/minute", storage_timeout_s=0.2), counts)
    assert counts.usable_redis() is not None
    with anyio.fail_after(30):  # (a bound on a hang, not a measure)
        assert await admitted(rate_limits, CI_TOKEN, "prompts/get", 4) == 2  # limited all the same
    assert counts.usable_redis() is None  # tried once, then left alone for a while: nothing waits on it


@pytest.mark.anyio
async def test_connecting_and_pinging_are_not_counted() -> None:
    rate_limits = limits(LimitsSettings(rate="1/minute", global_rate="1/minute"))
    for method in ("initialize", "server/discover", "ping") * 3:
        await rate_limits.admit(CI_TOKEN, method)
    assert await admitted(rate_limits, CI_TOKEN, "prompts/get", 2) == 1


@pytest.mark.parametrize("rate", ["5 per 0 second", "1/minute;5 per 00 seconds", "3/ 0minute"])
def test_a_window_of_no_length_is_refused_naming_the_key(rate: str) -> None:
    """The library reads "per 0 second" as per 1 second: check passed it, and it served as a 1 s window."""
    with pytest.raises(ConfigError) as refused:
        parse_config({"limits": {"burst": rate}})
    assert "limits.burst" in refused.value.message
    assert "has a window of no length" in refused.value.message


@pytest.mark.parametrize("rate", ["0/minute", "fast", "10/fortnight", "10/second;"])
def test_a_rate_that_is_none_is_refused_with_the_reason(rate: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({"limits": {"rate": rate}})
    assert "limits.rate" in refused.value.message


async def redis_clients(url: str) -> int:
    """How many connections the Redis at ``url`` holds, besides the one asking."""
    from redis.asyncio import Redis

    asking = Redis.from_url(url)
    try:
        return len(await asking.client_list()) - 1
    finally:
        await asking.aclose()


STOP_THEN_WAIT = """
import sys, anyio
from gateway.app import run_gateway
from gateway.config import parse_config
from gateway.identity.principal import Identity

def config(url):
    return parse_config({"limits": {"rate": "100/minute"}, "cluster": {"redis_url": url}})

async def main():
    async with run_gateway(config(sys.argv[1])) as gateway:
        await gateway.rate_limits.admit(Identity.token("ci"), "prompts/get")
        print("counted", flush=True)
        sys.stdin.readline()
        await gateway.reload(config(sys.argv[2]))
        await gateway.rate_limits.admit(Identity.token("ci"), "prompts/get")
        print("reloaded", flush=True)
        sys.stdin.readline()
    print("stopped", flush=True)  # the process lives on: what it left open is still open
    sys.stdin.readline()

anyio.run(main)
"""


@pytest.mark.anyio
async def test_a_stopped_or_reloaded_gateway_leaves_no_connection_to_the_limits_redis() -> None:
    """The limits' Redis connections stayed open until the process exited: after a reload onto another
    Redis, and after the gateway stopped inside a program that goes on (an embedding one, a test)."""
    async with redis_server() as first, redis_server() as second:
        command = [sys.executable, "-c", STOP_THEN_WAIT, first.url, second.url]
        async with await anyio.open_process(command, stderr=None) as process:
            assert process.stdin is not None
            assert process.stdout is not None
            lines = BufferedByteReceiveStream(process.stdout)

            async def step(said: bytes) -> None:
                with anyio.fail_after(30):
                    while await lines.receive_until(b"\n", 65536) != said:
                        pass  # the gateway's log lines, unconfigured in this program
                if said != b"stopped":
                    return
                with anyio.fail_after(10):
                    while await redis_clients(second.url):  # closing is awaited, not slept on
                        await anyio.sleep(0.02)

            await step(b"counted")
            assert await redis_clients(first.url) >= 1
            await process.stdin.send(b"\n")
            await step(b"reloaded")
            with anyio.fail_after(10):
                while await redis_clients(first.url):  # the replaced Redis's connections go by a task
                    await anyio.sleep(0.02)
            assert await redis_clients(second.url) >= 1
            await process.stdin.send(b"\n")
            await step(b"stopped")
            assert await redis_clients(second.url) == 0
            await process.stdin.send(b"\n")
            assert await process.wait() == 0
