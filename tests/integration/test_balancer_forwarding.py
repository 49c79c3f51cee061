"""Behind deploy/haproxy.cfg every client reaches a replica from the balancer's address. A tester found
the operator page's sign-in limit, counted per client address, locking every operator out for a minute
after one of them mistyped the token ten times: the balancer named no client. It now sends
``X-Forwarded-For``, which a replica believes from the addresses ``[server] trusted_proxies`` names.
Two clients on other loopback addresses (127.0.0.2 and 127.0.0.3) stand for two operators' machines.
Skipped with the reason where haproxy is missing (``.ci/run`` installs it and requires it)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.integration.helpers import demo_upstream, running_gateway, write_config
from tests.integration.services import haproxy

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.services]

ADMIN = "operator-token-0123456789"


def operator_from(url: str, address: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, transport=httpx.AsyncHTTPTransport(local_address=address), timeout=30)


async def test_one_operators_wrong_tokens_lock_out_only_that_operator(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "g.toml",
        [demo_upstream("writing", "writing")],
        server={
            "transport": "http",
            "port": 0,
            "trusted_proxies": ["127.0.0.1"],  # the balancer, as it reaches the replica
            "admin": {"enabled": True, "token": ADMIN, "sign_in_failures": "3/minute"},
        },
    )
    async with running_gateway(config) as replica:
        await replica.wait_for_event("upstream_state", upstream="writing", state="ready")  # /readyz: 200
        backend = replica.url.removeprefix("http://")
        async with (
            haproxy(tmp_path, [backend]) as url,
            operator_from(url, "127.0.0.2") as typist,
            operator_from(url, "127.0.0.3") as other,
        ):
            for _ in range(3):
                wrong = await typist.get("/admin", headers={"Authorization": "Bearer not-the-token-0123"})
                assert wrong.status_code == 401
            failed = await replica.wait_for_event("admin_sign_in_failed")
            assert failed["client"] == "127.0.0.2"
            assert (await typist.get("/admin", headers={"Authorization": f"Bearer {ADMIN}"})).status_code == 429
            assert (await other.get("/admin", headers={"Authorization": f"Bearer {ADMIN}"})).status_code == 200
