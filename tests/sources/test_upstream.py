from hypothesis import given
from hypothesis import strategies as st

from gateway.sources.backoff import Backoff
from gateway.sources.upstream_options import _without_credentials


@given(st.floats(0.01, 5), st.floats(5, 60), st.integers(1, 30))
def test_backoff_grows_exponentially_with_jitter_and_stays_capped(initial: float, cap: float, attempts: int) -> None:
    backoff = Backoff(initial, cap)
    for attempt in range(1, attempts + 1):
        delay = backoff.next_delay()
        ceiling = min(cap, initial * 2 ** (attempt - 1))
        assert delay is not None
        assert ceiling / 2 <= delay <= ceiling
    backoff.reset()
    first = backoff.next_delay()
    assert first is not None
    assert first <= initial


def test_backoff_gives_up_after_max_attempts() -> None:
    backoff = Backoff(0.1, 1, max_attempts=2)
    assert backoff.next_delay() is not None
    assert backoff.next_delay() is not None
    assert backoff.next_delay() is None


def test_urls_are_logged_without_credentials() -> None:
    assert _without_credentials("https://user:pw@host:8443/mcp?token=x") == "https://host:8443/mcp"


def test_the_http_listening_socket_is_tcp_so_asyncio_disables_nagle() -> None:
    """asyncio sets TCP_NODELAY on accepted connections only for a socket created as IPPROTO_TCP; without it
    every HTTP response waited ~40 ms for a delayed ACK (found by the benchmarks)."""
    import socket

    from gateway.serving import listening_socket

    with listening_socket("127.0.0.1", 0) as sock:
        assert sock.proto == socket.IPPROTO_TCP
