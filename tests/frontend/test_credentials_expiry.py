"""Streams and listens end when their credentials expire (``credentials_expiry.py``, ``Subscription``):
in process, on the event loop's clock, with identities made as the guard makes them."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import pytest

from gateway.config.server import AuthSettings, IssuerSettings
from gateway.frontend.http.credentials_expiry import until_credentials_expire
from gateway.frontend.hub import Subscription
from gateway.identity.access_tokens import AccessToken, AccessTokenValidator
from gateway.identity.principal import LOCAL, Identity
from gateway.protocol.lists import PROMPTS


def person(seconds_left: float) -> Identity:
    return Identity.access_token("https://idp.example", "alice", {}, valid_until=time.time() + seconds_left)


class Events:
    """An event stream that yields ``count`` events, then waits for more until closed."""

    def __init__(self, count: int) -> None:
        self.count, self.closed = count, False

    async def body(self) -> AsyncGenerator[bytes]:
        try:
            for n in range(self.count):
                yield b"event %d" % n
            await anyio.sleep_forever()
        finally:
            self.closed = True


@pytest.mark.anyio
async def test_credentials_that_never_expire_leave_the_stream_as_it_is() -> None:
    events = Events(1)
    body = events.body()
    assert until_credentials_expire(body, LOCAL) is body
    assert until_credentials_expire(body, Identity.token("ci")) is body
    assert until_credentials_expire(body, None) is body
    await body.aclose()


@pytest.mark.anyio
async def test_a_stream_ends_once_its_credentials_expire_and_its_source_is_closed() -> None:
    events = Events(2)
    with anyio.fail_after(10):
        received = [chunk async for chunk in until_credentials_expire(events.body(), person(0.2))]
    assert received == [b"event 0", b"event 1"]  # what came before is delivered
    assert events.closed


@pytest.mark.anyio
async def test_expired_credentials_end_the_stream_before_anything_is_sent() -> None:
    source = Events(3).body()
    with anyio.fail_after(10):
        received = [chunk async for chunk in until_credentials_expire(source, person(-5))]
    assert received == []
    assert source.ag_frame is None  # closed, never started


@pytest.mark.anyio
async def test_a_listen_is_told_of_changes_until_its_credentials_expire() -> None:
    subscription = Subscription(prompts=True, until=anyio.current_time() + 0.2)
    subscription.list_changed()
    with anyio.fail_after(10):
        assert await subscription.next_change() == PROMPTS  # a change before the end is delivered
        assert not await subscription.next_change()  # then it ends, as at a close
        assert not await subscription.next_change()


@pytest.mark.anyio
async def test_a_listen_without_an_end_waits_for_changes() -> None:
    subscription = Subscription(prompts=True)
    with anyio.move_on_after(0.05) as waited:
        await subscription.next_change()
    assert waited.cancelled_caught  # nothing ends it but a change or a close
    subscription.close()
    assert not await subscription.next_change()


def validator(leeway_s: float = 30) -> AccessTokenValidator:
    issuer = IssuerSettings(issuer="https://idp.example")
    return AccessTokenValidator(AuthSettings(resource="https://gw.example/mcp", issuers=(issuer,), leeway_s=leeway_s))


def token(**claims: Any) -> AccessToken:
    return AccessToken("https://idp.example", "alice", frozenset(), claims)


def test_a_token_is_relied_on_until_its_exp_and_the_leeway() -> None:
    assert validator(30).valid_until(token(exp=2_000_000_000)) == 2_000_000_030
    assert validator(0).valid_until(token(exp=2_000_000_000.5)) == 2_000_000_000.5


@pytest.mark.parametrize("exp", [None, float("nan"), float("inf"), True, "2000000000"])
def test_a_token_that_states_no_usable_expiry_is_relied_on_until_the_issuer_is_asked_again(exp: object) -> None:
    """An introspected token need not state ``exp``: its streams end when the issuer would be asked
    about it again (a revoked token is refused then), not never."""
    before = time.time()
    claims = {} if exp is None else {"exp": exp}
    until = validator(30).valid_until(token(**claims))
    assert before + AccessTokenValidator.UNDATED_S + 30 <= until <= time.time() + AccessTokenValidator.UNDATED_S + 30
