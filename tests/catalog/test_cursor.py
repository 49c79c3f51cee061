import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.catalog.cursor import MAX_CURSOR_CHARS, CursorCodec, CursorTooLarge, ListingPosition, PagePosition
from gateway.protocol.errors import InvalidCursor

codec = CursorCodec(b"k" * 32)
positions = st.lists(
    st.none() | st.builds(PagePosition, st.none() | st.text(max_size=40), st.integers(0, 10_000)),
    min_size=1,
    max_size=8,
).map(lambda ups: ListingPosition("gen1", tuple(ups)))


@given(positions)
def test_round_trip(position: ListingPosition) -> None:
    token = codec.encode(position)
    assert token.isascii()
    assert "=" not in token
    assert codec.decode(token, generation="gen1", upstream_count=len(position.upstreams)) == position


@given(positions, st.data())
def test_any_single_character_change_is_rejected(position: ListingPosition, data: st.DataObject) -> None:
    token = codec.encode(position)
    index = data.draw(st.integers(0, len(token) - 1))
    replacement = data.draw(
        st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_").filter(
            lambda c: c != token[index]
        )
    )
    tampered = token[:index] + replacement + token[index + 1 :]
    with pytest.raises(InvalidCursor):
        codec.decode(tampered, generation="gen1", upstream_count=len(position.upstreams))


@given(positions, st.data())
def test_truncation_and_extension_are_rejected(position: ListingPosition, data: st.DataObject) -> None:
    token = codec.encode(position)
    cut = data.draw(st.integers(0, len(token) - 1))
    with pytest.raises(InvalidCursor):
        codec.decode(token[:cut], generation="gen1", upstream_count=len(position.upstreams))
    with pytest.raises(InvalidCursor):
        codec.decode(
            token + data.draw(st.sampled_from("Aa0_-")), generation="gen1", upstream_count=len(position.upstreams)
        )


@given(st.text(max_size=200) | st.binary(max_size=200).map(lambda b: base64.urlsafe_b64encode(b).decode()))
def test_arbitrary_input_is_a_clean_invalid_cursor(token: str) -> None:
    with pytest.raises(InvalidCursor) as info:
        codec.decode(token, generation="gen1", upstream_count=2)
    assert info.value.code == -32602
    assert info.value.message == "Invalid cursor"


def test_foreign_secret_other_generation_and_other_layout_are_rejected() -> None:
    position = ListingPosition("gen1", (PagePosition("abc", 3), None))
    token = codec.encode(position)
    with pytest.raises(InvalidCursor, match="Invalid cursor") as info:
        CursorCodec(b"x" * 32).decode(token, generation="gen1", upstream_count=2)
    assert info.value.reason == "bad seal"
    with pytest.raises(InvalidCursor) as info:
        codec.decode(token, generation="gen2", upstream_count=2)
    assert info.value.reason == "issued under another configuration"
    with pytest.raises(InvalidCursor) as info:
        codec.decode(token, generation="gen1", upstream_count=3)
    assert info.value.reason == "wrong upstream count"


def test_non_string_and_oversize_cursors() -> None:
    for bad in (None, 7, "", ["a"], "A" * (MAX_CURSOR_CHARS + 1)):
        with pytest.raises(InvalidCursor):
            codec.decode(bad, generation="gen1", upstream_count=1)


def test_encoding_is_bounded() -> None:
    huge = ListingPosition("gen1", tuple(PagePosition("x" * 2048, 0) for _ in range(40)))
    with pytest.raises(CursorTooLarge):
        codec.encode(huge)


def test_a_cursor_reveals_nothing_of_what_it_holds() -> None:
    """Upstream cursors can carry hidden prompt names, and their count tells how many upstreams there are."""
    position = ListingPosition("gen1", (PagePosition("next-is-docs__secret_plan", 3), None))
    token = codec.encode(position)
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    assert b"secret_plan" not in raw
    assert b"gen1" not in raw
    one = codec.encode(ListingPosition("gen1", (PagePosition(None, 0),)))
    five = codec.encode(ListingPosition("gen1", tuple(PagePosition(None, 0) for _ in range(5))))
    assert len(one) == len(five)  # padded: the length does not count upstreams
    assert codec.encode(position) != token  # a fresh nonce each time


def test_secrets_rotate_the_first_seals_and_every_one_opens() -> None:
    position = ListingPosition("gen1", (PagePosition("abc", 1),))
    old, new = b"o" * 32, b"n" * 32
    issued_before = CursorCodec([old]).encode(position)
    rotated = CursorCodec([new, old])
    assert rotated.decode(issued_before, generation="gen1", upstream_count=1) == position
    issued_after = rotated.encode(position)
    assert CursorCodec([new]).decode(issued_after, generation="gen1", upstream_count=1) == position
    with pytest.raises(InvalidCursor):
        CursorCodec([old]).decode(issued_after, generation="gen1", upstream_count=1)
