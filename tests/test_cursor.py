import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.cursor import MAX_CURSOR_CHARS, CursorCodec, CursorTooLarge, ListingPosition, PagePosition
from gateway.errors import InvalidCursor

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
    assert info.value.reason == "bad signature"
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
