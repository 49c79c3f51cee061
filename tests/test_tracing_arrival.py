"""How an HTTP request's arrival is read for its spans (sans I/O: an ASGI scope in)."""

from __future__ import annotations

from collections.abc import Iterator

from gateway.observability.tracing import arrival_over_http

FIRST = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SECOND = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_of_a_repeated_trace_header_the_last_is_taken() -> None:
    scope = {
        "client": ("127.0.0.1", 5000),
        "headers": [(b"traceparent", FIRST.encode()), (b"host", b"x"), (b"traceparent", SECOND.encode())],
    }
    arrival = arrival_over_http(scope)
    assert dict(arrival.http_trace) == {"traceparent": SECOND}
    assert (arrival.address, arrival.port) == ("127.0.0.1", 5000)


def test_headers_given_as_any_iterable_are_read() -> None:
    def headers() -> Iterator[tuple[bytes, bytes]]:
        yield b"tracestate", b"vendor=1"
        yield b"baggage", b"\x00bad"  # a control character: not usable, left out

    arrival = arrival_over_http({"headers": headers()})
    assert dict(arrival.http_trace) == {"tracestate": "vendor=1"}
    assert arrival.address is None
