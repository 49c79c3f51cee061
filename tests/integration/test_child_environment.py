"""What a stdio upstream receives of the gateway's environment, seen from inside a real upstream process
started by the real gateway, itself started by the official SDK client with an environment of its own."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import mcp.types as t
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.integration.helpers import gateway_params, running_gateway, sdk_upstream, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
HTTP = {"transport": "http", "port": 0}

PROXY = "http://alice:s3cr3t-proxy-pw@proxy.internal:3128"
PASSED = {
    "SSL_CERT_FILE": "/etc/corp/ca.pem",
    "SSL_CERT_DIR": "/etc/corp/certs",
    "REQUESTS_CA_BUNDLE": "/etc/corp/ca.pem",
    "NODE_EXTRA_CA_CERTS": "/etc/corp/ca.pem",
    "UV_NATIVE_TLS": "1",
    "HTTPS_PROXY": PROXY,
    "https_proxy": PROXY,
    "HTTP_PROXY": PROXY,
    "NO_PROXY": "localhost,.internal",
    "no_proxy": "localhost,.internal",
    "UV_CACHE_DIR": "/var/cache/uv",
    "npm_config_cache": "/var/cache/npm",
}
KEPT_OUT = {"SUPER_SECRET_TOKEN": "tok-123", "GITHUB_TOKEN": "ghp_x", "AWS_SECRET_ACCESS_KEY": "aws"}


async def test_tls_proxy_and_cache_variables_reach_the_upstream_and_secrets_do_not(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "gateway.toml",
        [sdk_upstream("env", "environment", env={"FROM_CONFIG": "yes", "UV_CACHE_DIR": "/config/wins"})],
        gateway={"startup_wait_s": 30},
    )
    params = gateway_params(config)
    params.args[-1] = "info"  # the upstream's start at info level: the log is checked for the proxy password
    params.env = {**(params.env or {}), **PASSED, **KEPT_OUT}
    with tempfile.TemporaryFile("w+") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None) as client:
            result = await client.get_prompt("env__environment")
        content = result.messages[0].content
        assert isinstance(content, t.TextContent)
        seen = json.loads(content.text)
        errlog.seek(0)
        log = errlog.read()
    assert {k: seen.get(k) for k in PASSED} == {**PASSED, "UV_CACHE_DIR": "/config/wins"}  # env wins
    assert seen["FROM_CONFIG"] == "yes"
    assert not set(KEPT_OUT) & set(seen)
    assert "upstream_state" in log  # the log was captured
    assert "s3cr3t-proxy-pw" not in log


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc (Linux)")
async def test_descriptors_the_gateway_inherited_do_not_reach_its_upstreams(tmp_path: Path) -> None:
    """Under uvloop (libuv has no close_fds) a stdio upstream inherited every descriptor the gateway was
    started with: a client's open file reached the server and whatever it started."""
    config = write_config(tmp_path / "gateway.toml", [sdk_upstream("env", "environment")], server=HTTP)
    clients_file = tmp_path / "the-clients-own-file"
    with clients_file.open("w") as held:
        os.set_inheritable(held.fileno(), True)
        async with running_gateway(config, pass_fds=(held.fileno(),)) as gw:
            await gw.wait_for_event("upstream_state", upstream="env", state="ready")
            async with Client(streamable_http_client(f"{gw.url}/mcp"), mode="legacy", cache=None) as client:
                result = await client.get_prompt("env__descriptors")
    content = result.messages[0].content
    assert isinstance(content, t.TextContent)
    targets = json.loads(content.text).values()
    assert str(clients_file) not in targets
    assert any(target.startswith(("pipe:", "socket:")) for target in targets)  # its own stdio, read indeed
