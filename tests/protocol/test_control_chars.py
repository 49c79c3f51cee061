"""Text from elsewhere shown on a terminal: every character that steers a display is escaped (as
Python writes it, or as JSON does, still the same JSON value), and nothing else is touched."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from gateway.protocol.control_chars import escaped, has_control_chars, json_text

STEERING = ["\x1b", "\x07", "\x00", "\x7f", "\x9b", "\x9d", "\u202e", "\u2066", "\u200b", "\u2028", "\u00ad", "\ud800"]


def test_each_steering_character_is_caught_and_escaped() -> None:
    for ch in STEERING:
        assert has_control_chars(f"a{ch}b"), repr(ch)
        assert escaped(f"a{ch}b").isprintable(), repr(ch)
    assert escaped("pwn\x1b]0;owned\x07\x1b[2J") == "pwn\\x1b]0;owned\\x07\\x1b[2J"
    assert escaped("one\ntwo\tthree") == "one\\ntwo\\tthree"
    assert escaped("one\ntwo\x1b", lines=True) == "one\ntwo\\x1b"


def test_ordinary_text_of_any_script_is_left_alone() -> None:
    for text in ["code_review", "Überprüfung", "コードレビュー", "обзор кода", "مراجعة", "a b", "🙂", "\ue000"]:
        assert not has_control_chars(text)
        assert escaped(text) is text or escaped(text) == text


@given(st.text())
def test_json_text_is_the_same_json_with_nothing_steering_left(text: str) -> None:
    shown = json_text({"name": text, "list": [text]}, indent=2)
    assert json.loads(shown) == {"name": text, "list": [text]}
    assert not has_control_chars(shown.replace("\n", ""))
    assert not has_control_chars(escaped(text))
