"""The quick checks on a relayed get's path answer as the models they stand in front of: the recognition
of a plain-text ``prompts/get`` result never passes what the spec's validator refuses, and a get's params
are accepted, refused and worded as ``GetPromptParams`` does, whatever part of them is wrong."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gateway.protocol.errors import InvalidParams
from gateway.protocol.models import (
    GET_PROMPT_RESULT,
    GetPromptParams,
    PromptGet,
    check_prompt_result,
    parse_params,
    plain_text_result,
    prompt_get,
)

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
    listed: list[Any] = draw(plain_messages)
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


get_params = st.fixed_dictionaries(
    {},
    optional={
        "name": st.text(max_size=5) | json_values,
        "arguments": st.none() | st.dictionaries(st.text(max_size=3), st.text(max_size=3) | json_values) | json_values,
        "_meta": json_values,
    },
)


@settings(max_examples=500)
@given(get_params | json_values)
def test_a_gets_params_are_checked_as_the_model_checks_them(params: Any) -> None:
    try:
        checked = parse_params(GetPromptParams, params)
    except InvalidParams as refused:
        refusal: str | None = refused.message
    else:
        refusal = None
        assert prompt_get(params) == PromptGet(checked.name, checked.arguments)
    if refusal is not None:
        with pytest.raises(InvalidParams) as quick:
            prompt_get(params)
        assert quick.value.message == refusal
