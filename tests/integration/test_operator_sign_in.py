"""The operator page's sign-in, over real HTTP to a running gateway: signing out ends the cookie on
every replica (through a real Redis), every admin route answers its own Host only, the form's body is
bounded and refused unread, wrong tokens are limited per client address, and the cookie is ``Secure``
when a trusted proxy says the page was reached over HTTPS (a trial found all five missing)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import httpx
import pytest

from tests.integration.helpers import RunningGateway, demo_upstream, running_gateway, write_config
from tests.integration.services import free_port, redis_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ADMIN = "operator-token-0123456789"
KEY = "a-session-key-of-32-characters!!"


def config(tmp_path: Path, name: str = "g", *, cluster: dict[str, Any] | None = None, **server: Any) -> Path:
    admin = {"enabled": True, "token": ADMIN, **server.pop("admin", {})}
    return write_config(
        tmp_path / f"{name}.toml",
        [demo_upstream("writing", "writing")],
        server={"transport": "http", "port": server.pop("port", 0), "admin": admin, **server},
        cluster=cluster,
    )


async def signed_in(http: httpx.AsyncClient, url: str, **headers: str) -> str:
    answer = await http.post(f"{url}/admin/sign-in", data={"token": ADMIN}, headers=headers)
    assert answer.status_code == 303, answer.text
    return answer.headers["set-cookie"]


def secure(set_cookie: str) -> bool:
    return "secure" in [attribute.strip().lower() for attribute in set_cookie.split(";")[1:]]


def cookie_of(set_cookie: str) -> dict[str, str]:
    return {"Cookie": set_cookie.split(";", 1)[0]}


async def opens(http: httpx.AsyncClient, url: str, cookie: dict[str, str]) -> list[int]:
    """The statuses of the page, its event stream and its explain form, for ``cookie``."""
    statuses = [(await http.get(f"{url}/admin", headers=cookie)).status_code]
    async with http.stream("GET", f"{url}/admin/events", headers=cookie) as events:
        statuses.append(events.status_code)
    statuses.append((await http.get(f"{url}/admin/explain?name=writing__summarize", headers=cookie)).status_code)
    return statuses


@asynccontextmanager
async def replica(tmp_path: Path, redis_url: str) -> AsyncIterator[RunningGateway]:
    port = free_port()
    cluster = {"session_keys": [KEY], "redis_url": redis_url}
    async with running_gateway(config(tmp_path, f"replica-{port}", port=port, cluster=cluster)) as gateway:
        await gateway.wait_for_event("redis_connected")
        await gateway.wait_for_event("upstream_state", upstream="writing", state="ready")
        yield gateway


@pytest.mark.services
async def test_signing_out_ends_the_cookie_on_every_replica(tmp_path: Path) -> None:
    async with AsyncExitStack() as stack:
        redis = await stack.enter_async_context(redis_server())
        a = await stack.enter_async_context(replica(tmp_path, redis.url))
        b = await stack.enter_async_context(replica(tmp_path, redis.url))
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=20))
        cookie = cookie_of(await signed_in(http, a.url))
        other = cookie_of(await signed_in(http, a.url))  # another browser's sign-in, the same second perhaps
        assert await opens(http, a.url, cookie) == [200, 200, 200]
        assert await opens(http, b.url, cookie) == [200, 200, 200]  # replicas share the token, not the cookie
        signed_out = await http.post(f"{a.url}/admin/sign-out", headers=cookie)
        assert signed_out.status_code == 303
        assert "Max-Age=0" in signed_out.headers["set-cookie"]
        assert await opens(http, a.url, cookie) == [401, 401, 401]  # the same cookie, replayed
        assert await opens(http, b.url, cookie) == [401, 401, 401]
        assert await opens(http, b.url, other) == [200, 200, 200]  # only that sign-in ended
        event = await a.wait_for_event("admin_signed_out")
        assert event["client"] == "127.0.0.1"


async def test_signing_out_ends_the_cookie_on_a_gateway_alone(tmp_path: Path) -> None:
    async with running_gateway(config(tmp_path)) as gateway, httpx.AsyncClient(timeout=20) as http:
        await gateway.wait_for_event("upstream_state", upstream="writing", state="ready")
        cookie = cookie_of(await signed_in(http, gateway.url))
        assert await opens(http, gateway.url, cookie) == [200, 200, 200]
        assert (await http.post(f"{gateway.url}/admin/sign-out", headers=cookie)).status_code == 303
        assert await opens(http, gateway.url, cookie) == [401, 401, 401]


async def test_every_admin_route_answers_its_own_host_and_origin_only(tmp_path: Path) -> None:
    async with running_gateway(config(tmp_path)) as gateway, httpx.AsyncClient(base_url=gateway.url) as http:
        await gateway.wait_for_event("upstream_state", upstream="writing", state="ready")
        cookie = cookie_of(await signed_in(http, gateway.url))
        bearer = {"Authorization": f"Bearer {ADMIN}", **cookie}
        requests = [
            ("GET", "/admin", {}),
            ("GET", "/admin/events", {}),
            ("GET", "/admin/explain?name=writing__summarize", {}),
            ("POST", "/admin/sign-in", {"data": {"token": ADMIN}}),
            ("POST", "/admin/sign-out", {}),
            ("GET", "/admin/static/admin.css", {}),
        ]
        for method, path, more in requests:
            rebound = await http.request(method, path, headers={**bearer, "Host": "evil.example"}, **more)
            assert rebound.status_code == 421, (path, rebound.status_code)
            assert rebound.text.startswith("Misdirected Request"), path
            assert "set-cookie" not in rebound.headers, path
            foreign = await http.request(method, path, headers={**bearer, "Origin": "https://evil.example"}, **more)
            assert foreign.status_code == 403, (path, foreign.status_code)
            assert "set-cookie" not in foreign.headers, path
        assert await opens(http, gateway.url, cookie) == [200, 200, 200]  # the refused sign-out ended nothing


async def test_the_sign_in_form_is_refused_unread_past_a_few_kib(tmp_path: Path) -> None:
    """A client still sending its body gets the 413 (aiohttp reads the answer while it sends): the body
    was read whole first, 160 MiB of it held in memory."""
    async with running_gateway(config(tmp_path)) as gateway, aiohttp.ClientSession() as http:
        url = f"{gateway.url}/admin/sign-in"
        never = anyio.Event()
        form = {"Content-Type": "application/x-www-form-urlencoded"}

        async def endless() -> AsyncIterator[bytes]:
            yield b"token=" + b"a" * 65536
            await never.wait()  # and the rest never comes

        with anyio.fail_after(20):
            async with http.post(
                url, data=endless(), headers={"Content-Type": "application/x-www-form-urlencoded"}
            ) as r:
                assert r.status == 413  # chunked: refused once it passes the bound
                assert "at most 4096 bytes" in await r.text()
        declared = {**form, "Content-Length": str(160 << 20)}
        with anyio.fail_after(20):
            async with http.post(url, data=endless(), headers=declared) as r:
                assert r.status == 413  # a length declared over the bound: refused before any of it is read
        assert (await http.post(url, data={"token": ADMIN}, allow_redirects=False)).status == 303


async def test_wrong_tokens_are_limited_per_client_address(tmp_path: Path) -> None:
    path = config(tmp_path, admin={"sign_in_failures": "3/minute"})
    async with (
        running_gateway(path) as gateway,
        httpx.AsyncClient(base_url=gateway.url) as http,
        httpx.AsyncClient(base_url=gateway.url, transport=httpx.AsyncHTTPTransport(local_address="127.0.0.2")) as other,
    ):
        for _ in range(3):
            assert (await http.post("/admin/sign-in", data={"token": "a-wrong-guess-0123456789"})).status_code == 401
        limited = await http.post("/admin/sign-in", data={"token": ADMIN})  # the right one too, while limited
        assert limited.status_code == 429
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert "set-cookie" not in limited.headers
        assert (await other.post("/admin/sign-in", data={"token": ADMIN})).status_code == 303  # another address
        assert (await gateway.wait_for_event("admin_sign_in_failed"))["client"] == "127.0.0.1"
        assert (await gateway.wait_for_event("admin_sign_in_limited"))["client"] == "127.0.0.1"


async def test_wrong_bearer_tokens_count_as_wrong_sign_ins(tmp_path: Path) -> None:
    """Found by a tester: the limit covered the form alone, and guesses in an Authorization header went on
    without end (the right token got in meanwhile)."""
    path = config(tmp_path, admin={"sign_in_failures": "3/minute"})
    async with running_gateway(path) as gateway, httpx.AsyncClient(base_url=gateway.url) as http:
        for guess in range(3):
            wrong = {"Authorization": f"Bearer wrong-guess-{guess:020d}"}
            assert (await http.get("/admin", headers=wrong)).status_code == 401
        for headers in ({"Authorization": "Bearer wrong-guess-again-0000000"}, {"Authorization": f"Bearer {ADMIN}"}):
            limited = await http.get("/admin", headers=headers)
            assert limited.status_code == 429
            assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert (await http.post("/admin/sign-in", data={"token": ADMIN})).status_code == 429  # one count for both


async def test_the_cookie_is_secure_when_a_trusted_proxy_says_https(tmp_path: Path) -> None:
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"}
    trusting = config(tmp_path, "trusting", trusted_proxies=["127.0.0.1"], admin={"sign_in_failures": "1/minute"})
    async with (
        running_gateway(trusting) as gateway,
        httpx.AsyncClient(timeout=20) as proxy,  # from 127.0.0.1, the trusted proxy
        httpx.AsyncClient(timeout=20, transport=httpx.AsyncHTTPTransport(local_address="127.0.0.2")) as stranger,
    ):
        cookie = await signed_in(proxy, gateway.url, **forwarded)
        assert secure(cookie)
        assert not secure(await signed_in(proxy, gateway.url))  # the proxy reached over plain HTTP
        assert not secure(await signed_in(stranger, gateway.url, **forwarded))  # not from a trusted proxy
        signed_out = await proxy.post(f"{gateway.url}/admin/sign-out", headers={**forwarded, **cookie_of(cookie)})
        assert secure(signed_out.headers["set-cookie"])
        # the client address is the one the proxy names: one wrong guess limits that client, not the proxy
        wrong = await proxy.post(f"{gateway.url}/admin/sign-in", data={"token": "x" * 20}, headers=forwarded)
        assert wrong.status_code == 401
        assert (await gateway.wait_for_event("admin_sign_in_failed"))["client"] == "203.0.113.7"
        refused = await proxy.post(f"{gateway.url}/admin/sign-in", data={"token": ADMIN}, headers=forwarded)
        assert refused.status_code == 429
        assert await signed_in(proxy, gateway.url, **{**forwarded, "X-Forwarded-For": "203.0.113.8"})
    async with running_gateway(config(tmp_path)) as gateway, httpx.AsyncClient(timeout=20) as proxy:
        assert not secure(await signed_in(proxy, gateway.url, **forwarded))  # no proxy trusted: ignored
