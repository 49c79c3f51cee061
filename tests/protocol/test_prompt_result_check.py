"""The quick recognition of a plain-text ``prompts/get`` result never passes what the spec's validator
refuses: for any result shaped like one (right or wrong in every part), the quick answer "plain text"
implies the validator accepts it, and what it does not recognise still goes to the validator."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gateway.protocol.models import GET_PROMPT_RESULT, check_prompt_result, plain_text_result

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
)
plain_messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant"]),
            "content": st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=5)}),
        }
    ),
    max_size=3,
)
places = st.sampled_from(["result", "messages", "message", "role", "content", "type", "text", "extra"])


@st.composite
def results(draw: st.DrawFn) -> Any:
    """A plain-text result, then one of its parts (perhaps none) made anything at all."""
    listed = draw(plain_messages)
    result: Any = {"messages": listed, "_meta": draw(json_values)}
    place = draw(places)
    if place == "result":
        return draw(json_values)
    if place == "messages":
        result["messages"] = draw(json_values)
    elif listed:
        index = draw(st.integers(0, len(listed) - 1))
        if place == "message":
            listed[index] = draw(json_values)
        elif place in ("role", "content"):
            listed[index][place] = draw(json_values)
        elif place in ("type", "text"):
            listed[index]["content"][place] = draw(json_values | st.sampled_from(["text", "image", "Text"]))
        else:
            listed[index]["content"][draw(st.text(max_size=3))] = draw(json_values)
    return result


def validator_accepts(raw: Any) -> bool:
    try:
        GET_PROMPT_RESULT.validate_python(raw)
    except ValidationError:
        return False
    return True


@settings(max_examples=500)
@given(results())
def test_what_is_recognised_as_plain_text_the_validator_accepts(raw: Any) -> None:
    if plain_text_result(raw):
        assert validator_accepts(raw)


@given(results())
def test_the_check_accepts_and_refuses_as_the_validator_does(raw: Any) -> None:
    if validator_accepts(raw):
        check_prompt_result(raw)
    else:
        with pytest.raises(ValidationError):
            check_prompt_result(raw)


def test_a_plain_text_result_is_recognised() -> None:
    text = {"role": "user", "content": {"type": "text", "text": "Write about x."}}
    assert plain_text_result({"messages": [text, {**text, "role": "assistant"}], "_meta": {"k": 1}})
    assert not plain_text_result({"messages": [{**text, "content": {"type": "image", "data": "", "mimeType": ""}}]})
