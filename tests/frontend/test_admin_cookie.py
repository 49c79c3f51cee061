"""The operator page's sign-in cookie: issued for one token, for twelve hours, checked by the gateway
itself (a trial found the old one, of a constant value, worked for as long as the token did)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gateway.frontend.admin.page import CLOCK_SKEW_S, COOKIE_MAX_AGE_S, cookie_valid, cookie_value

TOKEN = "operator-token-0123456789"
NOW = 1_800_000_000


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


@given(st.text(max_size=120))
def test_any_other_value_is_refused_without_an_error(value: str) -> None:
    assert not cookie_valid(value, TOKEN, NOW)
