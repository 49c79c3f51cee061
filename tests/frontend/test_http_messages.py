"""The HTTP front end's header reading (sans I/O: an ASGI scope in, a dict out)."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request as HttpRequest

from gateway.frontend.http.messages import headers_of

names = st.sampled_from([b"accept", b"mcp-name", b"x-a", b"host"])
values = st.binary(max_size=8)


def _request(headers: object) -> HttpRequest:
    return HttpRequest({"type": "http", "method": "POST", "path": "/mcp", "headers": headers})


@given(st.lists(st.tuples(names, values), max_size=12))
def test_of_repeated_headers_the_first_wins(pairs: list[tuple[bytes, bytes]]) -> None:
    expected: dict[str, str] = {}
    for name, value in pairs:
        expected.setdefault(name.decode("latin-1"), value.decode("latin-1"))
    assert headers_of(_request(pairs)) == expected


def test_headers_given_as_any_iterable_are_read() -> None:
    def pairs() -> Iterator[tuple[bytes, bytes]]:
        yield b"accept", b"application/json"
        yield b"accept", b"text/html"

    assert headers_of(_request(pairs())) == {"accept": "application/json"}
