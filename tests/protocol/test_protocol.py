import contextlib
import json
import re
from collections.abc import Callable

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.protocol import jsonrpc
from gateway.protocol.errors import GatewayError, InvalidParams, InvalidRequest, ParseError
from gateway.protocol.jsonrpc import (
    Batch,
    ErrorResponse,
    Malformed,
    Notification,
    Request,
    Response,
    UnusableResponse,
    decode,
    dumps,
    encode,
    long_integer_in,
    request_id_of,
)
from gateway.protocol.versions import HANDSHAKE_VERSIONS, at_least, negotiate

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"ping"}', Request(1, "ping")),
        (b'{"jsonrpc":"2.0","id":"a","method":"x","params":{"k":1}}', Request("a", "x", {"k": 1})),
        (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', Notification("notifications/initialized")),
        (b'{"jsonrpc":"2.0","id":3,"result":{}}', Response(3, {})),
        (b'{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"m"}}', ErrorResponse(3, {"code": -1, "message": "m"})),
    ],
)
def test_decode_valid(frame: bytes, expected: object) -> None:
    assert decode(frame) == expected
    assert decode(encode(expected)) == expected  # type: ignore[arg-type]


def test_a_number_of_too_many_digits_is_named_in_the_protocols_words() -> None:
    """Found by a tester: the error quoted Python's own ("use sys.set_int_max_str_digits() to increase")."""
    with pytest.raises(ParseError) as refused:
        decode(b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}')
    assert refused.value.message == "Parse error: a number in the message has more than 4300 digits"


@pytest.mark.parametrize(
    ("frame", "error", "request_id"),
    [
        (b"{not json", ParseError, None),
        (b"\xff\xfe", ParseError, None),
        (b"[" * 100_000 + b"]" * 100_000, ParseError, None),
        (b'"just a string"', InvalidRequest, None),
        (b'{"jsonrpc":"1.0","id":4,"method":"ping"}', InvalidRequest, 4),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', InvalidRequest, None),
        (b'{"jsonrpc":"2.0","id":5,"method":7}', InvalidRequest, 5),
        (b'{"jsonrpc":"2.0","id":6,"method":"x","params":[1]}', InvalidRequest, 6),
        (b'{"jsonrpc":"2.0","id":7}', InvalidRequest, 7),
        (b"[]", InvalidRequest, None),
    ],
)
def test_decode_invalid(frame: bytes, error: type[Exception], request_id: object) -> None:
    with pytest.raises(error) as info:
        decode(frame)
    assert request_id_of(info.value) == request_id


def test_batch_keeps_valid_members_and_marks_bad_ones() -> None:
    batch = decode(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}, 5, {"jsonrpc":"2.0","id":2}]')
    assert isinstance(batch, Batch)
    assert batch.items[0] == Request(1, "ping")
    assert isinstance(batch.items[1], Malformed)
    assert batch.items[1].id is None
    assert isinstance(batch.items[2], Malformed)
    assert batch.items[2].id == 2


@given(json_values)
def test_decode_never_fails_other_than_cleanly(value: object) -> None:
    with contextlib.suppress(ParseError, InvalidRequest):
        decode(json.dumps(value))


@given(st.binary(max_size=200))
def test_decode_of_random_bytes_fails_cleanly(data: bytes) -> None:
    with contextlib.suppress(ParseError, InvalidRequest):
        decode(data)


def test_version_negotiation() -> None:
    for version in HANDSHAKE_VERSIONS:
        assert negotiate(version) == version
    assert negotiate("1999-01-01") == HANDSHAKE_VERSIONS[-1]
    assert negotiate(None) == HANDSHAKE_VERSIONS[-1]
    assert at_least("2025-06-18", "2025-03-26")
    assert not at_least("2024-11-05", "2025-03-26")
    assert not at_least("zzz", "2024-11-05")  # unknown revisions compare as oldest, not by string order


@pytest.mark.parametrize(
    ("frame", "error", "request_id", "fragment"),
    [
        (rb'{"jsonrpc":"2.0","id":"\ud800","method":"ping"}', InvalidRequest, None, '"id" contains an unpaired'),
        (rb'{"jsonrpc":"2.0","id":"\ud800","method":"ping","params":{"x":NaN}}', InvalidRequest, None, '"id"'),
        (rb'{"jsonrpc":"2.0","id":2,"method":"p\udfffng"}', InvalidRequest, 2, "method contains"),
        (
            rb'{"jsonrpc":"2.0","id":3,"method":"x","params":{"a":[1,{"b":"\udc00"}]}}',
            InvalidParams,
            3,
            "params.a[1].b",
        ),
        (rb'{"jsonrpc":"2.0","id":4,"method":"x","params":{"a":Infinity}}', InvalidParams, 4, "not a finite number"),
        (b'{"jsonrpc":"2.0","id":5,"method":"x","params":{"a":"\xed\xb0\x80"}}', InvalidParams, 5, "params.a contains"),
        (b'{"jsonrpc":"2.0","id":6,"method":"x","params":{"a":1' + b"2" * 5000 + b"}}", ParseError, None, "digits"),
        (b'{"jsonrpc":"2.0","id":7,"method":"x"', ParseError, None, "not valid JSON"),
        (b'{"jsonrpc":"2.0","id":8,"method":"\xff"}', ParseError, None, "not valid UTF-8"),
    ],
)
def test_values_utf8_json_cannot_carry_are_refused_where_they_stand(
    frame: bytes, error: type[Exception], request_id: object, fragment: str
) -> None:
    with pytest.raises(error) as info:
        decode(frame)
    assert request_id_of(info.value) == request_id
    assert fragment in str(info.value)


def test_an_answer_that_cannot_be_relayed_settles_its_request_as_unusable() -> None:
    assert decode(rb'{"jsonrpc":"2.0","id":9,"result":{"t":"\ud800"}}') == UnusableResponse(
        9, "result.t contains an unpaired UTF-16 surrogate"
    )
    assert decode(b'{"jsonrpc":"2.0","id":9,"result":{"m":{"s":NaN}}}') == UnusableResponse(
        9, "result.m.s is not a finite number"
    )
    assert decode(b'{"jsonrpc":"2.0","id":9,"result":[]}') == UnusableResponse(9, '"result" is not an object')


@given(st.text(st.characters(exclude_categories=()), max_size=30), st.floats())
def test_dumps_never_raises_and_always_writes_strict_utf8_json(text: str, number: float) -> None:
    data = dumps({"t": text, "n": number, "k": {text: [number]}})
    decoded = json.loads(data.decode("utf-8"), parse_constant=lambda c: pytest.fail(f"{c} written"))
    assert decoded["t"] == text


finite_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63, max_value=2**90) | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)  # fmt: skip


@given(finite_json)
def test_frames_read_and_written_as_the_standard_library_reads_them(value: object) -> None:
    """orjson does the work where it can and the standard library where it refuses (an integer past 64
    bits): a relayed value is the one that came in, whichever of them read and wrote it."""
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"v": value}}).encode()
    request = decode(frame)
    assert isinstance(request, Request)
    assert request.params == {"v": value}
    assert json.loads(dumps(request.params)) == {"v": value}


SUSPECT_IN_ONE_REGEX = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]|NaN|Infinity|[0-9]{19}")
"""What a frame's bytes were screened for before orjson was trusted to refuse the rest: its definition."""
frame_like = st.lists(
    st.sampled_from(
        [
            b"\\u",
            b"d",
            b"D",
            b"8",
            b"b",
            b"\xed",
            b"\xa0",
            b"\xbf",
            b"NaN",
            b"Infinity",
            b"1",
            b"0",
            b"x",
            b'"',
            b"{",
            b"}",
            b":",
            b",",
            b"[",
            b"]",
            b"-",
            b"e",
            b"4",
        ]
    )
    | st.binary(max_size=4),
    max_size=60,
).map(b"".join)
message_like = st.builds(
    lambda head, inner, tail: b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"v":' + head + inner + tail + b"}}",
    st.sampled_from([b"", b'"', b"[", b'{"k":']),
    frame_like,
    st.sampled_from([b"", b'"', b"]", b"}"]),
)


def outcome(read: Callable[[bytes], object], data: bytes) -> object:
    try:
        return read(data)
    except GatewayError as exc:
        return type(exc), exc.message


def screened_by_the_one_regex(data: bytes) -> object:
    """decode as it was: a frame the regex picked out read by the standard library and walked; any other
    read by orjson (what orjson refuses, by the standard library and walked: ``1e400``, below)."""
    suspect = SUSPECT_IN_ONE_REGEX.search(data) is not None
    if not suspect:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            suspect = True
    if suspect:
        obj = jsonrpc._decode_leniently(data)
    if isinstance(obj, list):
        return decode(data)  # (batches are not what this compares)
    return jsonrpc._from_object(obj, suspect)


@given(message_like | frame_like | st.binary(max_size=200))
def test_what_orjson_refuses_is_read_as_the_one_regex_screen_read_it(data: bytes) -> None:
    """Only integers past 64 bits are screened for now: every other frame the regex picked out (a lone
    surrogate, NaN, Infinity) orjson refuses, and the refusal reads it the same way."""
    assert outcome(decode, data) == outcome(screened_by_the_one_regex, data)


def test_the_screen_finds_a_long_integer_at_a_frames_end() -> None:
    assert long_integer_in(b'{"a":' + b"1" * 19 + b"}")
    assert not long_integer_in(b'{"a":' + b"1" * 18 + b', "b": ' + b"2" * 18 + b"}")  # 36 digits, no run of 19


digit_pieces = st.sampled_from([b"0", b"9", b"5", b"-", b".", b"a", b"\xd9", b"\xff", b"1" * 18])
digit_heavy = st.lists(digit_pieces, max_size=60).map(b"".join)


@given(digit_heavy | st.binary(max_size=300))
def test_the_screen_finds_exactly_the_runs_of_19_ascii_digits(data: bytes) -> None:
    assert long_integer_in(data) == (re.search(rb"[0-9]{19}", data) is not None)


def test_a_number_past_the_float_range_is_refused_as_not_finite() -> None:
    """``1e400`` reads as infinity (no pattern named it, so it used to pass unchecked, to fail far away)."""
    with pytest.raises(InvalidParams, match=r"params\.a is not a finite number"):
        decode(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1e400}}')


def test_an_integer_past_64_bits_is_relayed_as_sent() -> None:
    request = decode(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"n":123456789012345678901234567890}}')
    assert isinstance(request, Request)
    assert dumps(request.params) == b'{"n":123456789012345678901234567890}'


def test_a_clients_key_that_looks_like_a_content_tag_is_still_named() -> None:
    from gateway.protocol.models import GetPromptParams, parse_params

    with pytest.raises(InvalidParams, match=r"params\.arguments\.content-type=text: Input should be a valid string"):
        parse_params(GetPromptParams, {"name": "x", "arguments": {"content-type=text": 1}})


def _nested_in_params(levels: int, as_list: bool) -> bytes:
    opening, closing = (b"[", b"]") if as_list else (b'{"k":', b"}")
    return b'{"jsonrpc":"2.0","id":3,"method":"m","params":{"x":' + opening * levels + b"7" + closing * levels + b"}}"


@given(st.integers(min_value=0, max_value=1000), st.booleans())
def test_a_message_nested_past_the_bound_is_refused_naming_where_and_one_within_it_is_read(
    levels: int, as_list: bool
) -> None:
    """The message is the first level and its params the second: a value nested ``levels`` deep inside
    them reaches ``levels + 2``. Refused past ``MAX_NESTING`` (a value that deep could not be written on),
    from the orjson path and from the standard library's (a long integer sends the frame there) alike."""
    for frame in (_nested_in_params(levels, as_list), _nested_in_params(levels, as_list).replace(b"7", b"7" * 20)):
        if levels + 2 > jsonrpc.MAX_NESTING:
            with pytest.raises(InvalidParams, match=r"Invalid params: params\.x.* is nested more than 64 levels deep"):
                decode(frame)
        else:
            message = decode(frame)
            assert isinstance(message, Request)
            assert message.params is not None


def test_brackets_inside_strings_are_no_nesting_and_an_answer_nested_too_deeply_is_unusable() -> None:
    text = "{[" * 500
    message = decode(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"t": text}}).encode())
    assert isinstance(message, Request)
    assert message.params == {"t": text}
    deep: object = 1
    for _ in range(70):
        deep = {"a": deep}
    answer = decode(json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"x": deep}}).encode())
    assert isinstance(answer, jsonrpc.UnusableResponse)
    assert "is nested more than 64 levels deep" in answer.problem
    assert len(answer.problem) < 300  # the path is shortened in the middle
