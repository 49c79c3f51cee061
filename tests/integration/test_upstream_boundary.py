"""The supervision boundary around each upstream: whatever one upstream's connection raises while it is
built or while it serves (a setting the HTTP client or the OS refuses, a fault of the gateway's own or a
library's), that upstream alone fails, says why (its state, its log, ``check``) and is tried again; the
other upstreams and the front end keep serving. Before, any exception but the expected few left the
supervisor and ended the whole gateway (issue 35)."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
import structlog
from mcp import Client

import gateway.transports.http_client as http_client
from gateway.__main__ import EXIT_CONFIG, EXIT_UPSTREAM_FAILED
from gateway.app import Gateway, run_gateway
from gateway.config import load_config
from gateway.reports import check_command
from gateway.serving import listening_socket, serve_http
from gateway.transports import orphans
from tests.integration.helpers import (
    ROOT,
    demo_upstream,
    gateway_command,
    http_upstream,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


class Injected(Exception):
    """Nothing in the gateway expects it: it stands for any fault of the gateway's own or a library's."""


Where = Literal["opening", "serving"]


@pytest.fixture(autouse=True)
def _no_subreaper(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway runs in this process here: it must not adopt (and at its end, stop) the test's own
    children, the upstream server among them."""
    monkeypatch.setattr(orphans, "become_subreaper", lambda: False)


class Fault:
    """``open_streamable_http`` as the gateway's connector calls it, raising ``Injected`` while the
    connection is being opened, or from a task of the connection once it serves (as a failed POST's task
    did), for as long as it is armed."""

    def __init__(self, where: Where) -> None:
        self.where = where
        self.armed = True
        self.fire = anyio.Event()
        self._real = http_client.open_streamable_http

    @asynccontextmanager
    async def open(self, url: str, *args: Any, **kwargs: Any) -> AsyncIterator[http_client.StreamableHttpStream]:
        if self.armed and self.where == "opening":
            raise Injected("raised while opening")
        async with self._real(url, *args, **kwargs) as stream, anyio.create_task_group() as tg:
            if self.armed and self.where == "serving":
                tg.start_soon(self._raise_when_fired)
            yield stream
            tg.cancel_scope.cancel()

    async def _raise_when_fired(self) -> None:
        await self.fire.wait()
        raise Injected("raised while serving")


def config_of(tmp_path: Path, url: str) -> Path:
    return write_config(
        tmp_path / "c.toml",
        [demo_upstream("writing", "writing"), {"namespace": "dyn", "transport": "streamable-http", "url": url}],
        gateway={"restart_initial_s": 0.2, "restart_max_s": 0.5},
        server={"transport": "http", "port": 0},
    )


@asynccontextmanager
async def serving(gateway: Gateway) -> AsyncIterator[str]:
    """The gateway's HTTP front end on an ephemeral port, in this process; yields its MCP URL."""
    sock = listening_socket("127.0.0.1", 0)
    stopping = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_http(gateway, stopping=stopping, sock=sock))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        stopping.set()


async def until(condition: Callable[[], bool], changed: Callable[[], AbstractAsyncContextManager[None]]) -> None:
    with anyio.fail_after(20):
        while not condition():
            async with changed():
                pass


async def prompt_names(url: str) -> set[str]:
    async with Client(url, mode="legacy", cache=None) as client:
        return {p.name for p in (await client.list_prompts()).prompts}


@pytest.mark.parametrize("where", ["opening", "serving"])
async def test_an_unexpected_exception_fails_only_its_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: Where
) -> None:
    fault = Fault(where)
    monkeypatch.setattr(http_client, "open_streamable_http", fault.open)
    async with http_upstream("dynamic", "streamable-http") as url:
        config = load_config(config_of(tmp_path, url))
        with structlog.testing.capture_logs() as logs:
            async with run_gateway(config, settle=True) as gateway, serving(gateway) as front:
                dyn = next(c for c in gateway.connectors if c.namespace == "dyn")

                @asynccontextmanager
                async def changed() -> AsyncIterator[None]:
                    await gateway.states_changed()
                    yield

                if where == "serving":
                    await until(lambda: dyn.state == "ready", changed)
                    fault.fire.set()
                await until(lambda: dyn.state == "backing-off", changed)
                assert dyn.last_error is not None
                assert f"Upstream 'dyn' failed unexpectedly (Injected: raised while {where})" in dyn.last_error
                names = await prompt_names(front)
                assert "writing__summarize" in names  # the other upstream and the front end serve on
                assert not any(name.startswith("dyn__") for name in names)
                fault.armed = False
                await until(lambda: dyn.ready, changed)  # back by itself once the fault is gone
                assert "dyn__pid" in await prompt_names(front)
    logged = [e for e in logs if e["event"] == "upstream_unexpected_error"]
    assert logged
    assert logged[0]["upstream"] == "dyn"
    assert isinstance(logged[0]["exc_info"], BaseException)


async def test_check_says_why_an_upstream_failed_unexpectedly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(http_client, "open_streamable_http", Fault("opening").open)
    async with http_upstream("dynamic", "streamable-http") as url:
        with structlog.testing.capture_logs():
            assert await check_command(load_config(config_of(tmp_path, url))) == EXIT_UPSTREAM_FAILED
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:] if line.strip()}
    assert rows["writing"].split()[2] == "ready"
    assert rows["dyn"].split()[2] == "backing-off"
    assert "failed unexpectedly (Injected: raised while opening)" in rows["dyn"]


@pytest.mark.parametrize("command", ["serve", "check"])
def test_a_setting_no_process_can_be_given_is_refused_at_load(tmp_path: Path, command: str) -> None:
    """A NUL byte in a stdio upstream's environment (``\\u0000`` in TOML): ``check`` died of Python's
    spawn ValueError with a traceback, and ``serve`` (on uvloop, which spawns without that check) started
    the server with the value cut short. Refused at load now, naming the key and not the value, as a
    setting that can never work is (the credentials case below)."""
    config = write_config(
        tmp_path / "c.toml",
        [demo_upstream("writing", "writing"), demo_upstream("nul", "writing", env={"X": "a\u0000b"})],
    )
    result = subprocess.run(
        gateway_command(config, command), capture_output=True, text=True, timeout=60, cwd=ROOT, check=False
    )
    assert result.returncode == EXIT_CONFIG, result.stderr
    assert "upstreams[1].env: X holds a NUL byte" in result.stderr
    assert "a\x00b" not in result.stderr


@pytest.mark.parametrize("command", ["serve", "check"])
def test_credentials_in_the_url_and_an_authorization_header_are_refused_at_load(tmp_path: Path, command: str) -> None:
    """The config of issue 35: ``check`` accepted it, ``serve`` listened and ~0.3 s later exited 1 with
    aiohttp's ValueError, every upstream and the front end with it."""
    config = write_config(
        tmp_path / "c.toml",
        [
            demo_upstream("writing", "writing"),
            {
                "namespace": "dyn",
                "transport": "streamable-http",
                "url": "http://operator:pw@127.0.0.1:9/mcp",
                "headers": {"Authorization": "Bearer x"},
            },
        ],
        server={"transport": "http", "port": 0},
    )
    result = subprocess.run(
        gateway_command(config, command), capture_output=True, text=True, timeout=60, cwd=ROOT, check=False
    )
    assert result.returncode == EXIT_CONFIG, result.stderr
    assert "upstreams[1].headers: an Authorization header cannot go with credentials in url" in result.stderr
    assert "pw" not in result.stderr.replace("password", "")
