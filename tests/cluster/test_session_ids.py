"""Sealed session ids: what they carry, and that nothing but an untouched, unexpired id of ours opens."""

from __future__ import annotations

import base64

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway.cluster.session_ids import MAX_ID_CHARS, PREFIX, SessionIds

KEY, OTHER = b"k" * 32, b"o" * 32
NOW = 1_800_000_000.0


def issue(ids: SessionIds, **overrides: object) -> str:
    fields: dict[str, object] = {
        "protocol_version": "2025-11-25",
        "principal": "alice",
        "capabilities": {"elicitation": {"form": {}}, "sampling": {}, "experimental": {"x": 1}},
        "client_name": "claude-code",
        "now": NOW,
    }
    fields.update(overrides)
    return ids.issue(**fields)  # type: ignore[arg-type]


def test_an_id_carries_the_session_and_opens_anywhere_with_the_keys() -> None:
    session_id = issue(SessionIds([KEY], ttl_s=3600))
    assert session_id.startswith(PREFIX)
    assert session_id.isascii()
    assert session_id.isprintable()
    assert len(session_id) < 400
    state = SessionIds([KEY]).open(session_id, now=NOW + 10)  # another replica: same keys
    assert state is not None
    assert (state.protocol_version, state.principal, state.client_name) == ("2025-11-25", "alice", "claude-code")
    assert state.capabilities == {"elicitation": {"form": {}}, "sampling": {}}  # only what it can be asked
    assert (state.created, state.expires) == (int(NOW), int(NOW + 3600))


def test_keys_rotate_without_dropping_sessions() -> None:
    old_id = issue(SessionIds([OTHER]))
    rotated = SessionIds([KEY, OTHER])
    assert rotated.open(old_id, now=NOW) is not None
    new_id = issue(rotated)
    assert SessionIds([KEY]).open(new_id, now=NOW) is not None
    assert SessionIds([OTHER]).open(new_id, now=NOW) is None


def test_without_configured_keys_a_process_opens_only_its_own() -> None:
    mine, theirs = SessionIds(), SessionIds()
    assert mine.open(issue(mine), now=NOW) is not None
    assert theirs.open(issue(mine), now=NOW) is None


def test_a_client_cannot_make_its_capabilities_the_size_of_the_id() -> None:
    huge = {"elicitation": {"x": "y" * 100_000}, "sampling": {}}
    session_id = issue(SessionIds([KEY]), capabilities=huge, client_name="n" * 10_000)
    assert len(session_id) < 600
    state = SessionIds([KEY]).open(session_id, now=NOW)
    assert state is not None
    assert state.capabilities == {"elicitation": {}, "sampling": {}}


@settings(max_examples=300)
@given(st.data())
def test_any_bit_flip_or_truncation_is_refused(data: st.DataObject) -> None:
    ids = SessionIds([KEY])
    session_id = issue(ids)
    raw = bytearray(base64.urlsafe_b64decode(session_id[len(PREFIX) :] + "=="))
    if data.draw(st.booleans()):
        position = data.draw(st.integers(0, len(raw) - 1))
        raw[position] ^= 1 << data.draw(st.integers(0, 7))
    else:
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    forged = PREFIX + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    assert ids.open(forged, now=NOW) is None


@given(st.floats(0, 10 * 86_400), st.floats(0, 10 * 86_400))
@example(ttl=863999.9999999999, later=863999.0)  # NOW + ttl rounds up to a whole second: int() of each part did not
def test_an_id_replayed_after_it_expired_is_refused(ttl: float, later: float) -> None:
    ids = SessionIds([KEY], ttl_s=max(ttl, 1.0))
    session_id = issue(ids)
    opened = ids.open(session_id, now=NOW + later)
    assert (opened is not None) == (int(NOW + max(ttl, 1.0)) > NOW + later)  # expires: the whole second of issue + ttl


@given(
    st.text(max_size=3000) | st.text(alphabet="AZaz09_-=.+/ \x00\u00e9\ud800", max_size=3000).map(lambda t: PREFIX + t)
)
def test_any_string_opens_to_nothing_without_raising(session_id: str) -> None:
    assert SessionIds([KEY]).open(session_id, now=NOW) is None


@given(st.text(max_size=40))
def test_only_the_canonical_spelling_of_an_id_opens(principal: str) -> None:
    """A last base64url character carries unused bits: the spellings that set them decode to the same
    bytes, and only the one base64url writes opens (a deleted id came back under its neighbour)."""
    ids = SessionIds([KEY], ttl_s=3600)
    session_id = issue(ids, principal=principal)
    assert ids.open(session_id, now=NOW) is not None
    spare_bits = {2: 4, 3: 2}.get(len(session_id.partition(".")[2]) % 4, 0)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(session_id[-1])
    for spare in range(1, 1 << spare_bits):
        assert ids.open(session_id[:-1] + alphabet[last ^ spare], now=NOW) is None


def test_an_oversized_id_is_not_even_decoded() -> None:
    assert SessionIds([KEY]).open(PREFIX + "A" * MAX_ID_CHARS, now=NOW) is None
