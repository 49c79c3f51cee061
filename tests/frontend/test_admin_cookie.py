"""The operator page's sign-in cookie: issued for one token, for twelve hours, checked by the gateway
itself (a trial found the old one, of a constant value, worked for as long as the token did); each
sign-in its own, so that signing out ends that one alone; the record of sign-outs bounded."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.cluster.replicas import NoCluster
from gateway.frontend.admin.sign_ins import (
    CLOCK_SKEW_S,
    COOKIE_MAX_AGE_S,
    SignIn,
    SignOuts,
    cookie_valid,
    new_sign_in,
    sign_in_of,
)
from gateway.frontend.admin.sign_ins import cookie_value as cookie_for

TOKEN = "operator-token-0123456789"
NOW = 1_800_000_000


def cookie_value(token: str, issued: int) -> str:
    return cookie_for(token, SignIn("an-id", issued))


def test_a_fresh_cookie_is_accepted_until_it_is_twelve_hours_old() -> None:
    cookie = cookie_value(TOKEN, NOW)
    assert TOKEN not in cookie
    assert cookie_valid(cookie, TOKEN, NOW)
    assert cookie_valid(cookie, TOKEN, NOW + COOKIE_MAX_AGE_S)
    assert not cookie_valid(cookie, TOKEN, NOW + COOKIE_MAX_AGE_S + 1)


def test_a_cookie_for_another_token_or_from_the_future_is_refused() -> None:
    assert not cookie_valid(cookie_value("another-token-0123456789", NOW), TOKEN, NOW)
    assert not cookie_valid(cookie_value(TOKEN, NOW + CLOCK_SKEW_S + 1), TOKEN, NOW)
    forged = f"{NOW + 3600}.{cookie_value(TOKEN, NOW).partition('.')[2]}"  # a later time under an old MAC
    assert not cookie_valid(forged, TOKEN, NOW + 7200)
    other_id = cookie_value(TOKEN, NOW).replace(".an-id.", ".another-id.")  # another sign-in under its MAC
    assert not cookie_valid(other_id, TOKEN, NOW)


def test_two_sign_ins_in_the_same_second_are_told_apart() -> None:
    first, second = new_sign_in(NOW), new_sign_in(NOW)
    assert first.id != second.id
    assert sign_in_of(cookie_for(TOKEN, first), TOKEN, NOW) == first


@pytest.mark.anyio
async def test_sign_outs_are_bounded_and_never_forget_one_early() -> None:
    sign_outs = SignOuts(NoCluster(), kept=3)
    ended = [SignIn(f"id{i}", NOW + i) for i in range(5)]
    for sign_in in ended:
        await sign_outs.sign_out(sign_in, NOW + 10)
    assert len(sign_outs) == 3
    assert all([await sign_outs.ended(sign_in) for sign_in in ended])  # the two given way: under the floor
    assert not await sign_outs.ended(SignIn("id-later", NOW + 5))
    await sign_outs.sign_out(SignIn("late", NOW + COOKIE_MAX_AGE_S), NOW + COOKIE_MAX_AGE_S + 10)
    assert len(sign_outs) == 1  # those whose cookies expired are forgotten


@given(st.text(max_size=120))
def test_any_other_value_is_refused_without_an_error(value: str) -> None:
    assert not cookie_valid(value, TOKEN, NOW)
