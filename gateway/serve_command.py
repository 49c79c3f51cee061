"""The ``serve`` command's lifetime: signals (SIGHUP reloads, SIGTERM/SIGINT stop, a second one kills what
remains), the config file's watch, and the one front end the config names. Beside ``__main__`` so that the
command line stays thin; the gateway itself is built in ``app``, its front ends in ``serving``."""

from __future__ import annotations

import os
import signal
import socket
from contextlib import suppress

import anyio
import structlog

from gateway.app import Gateway, run_gateway
from gateway.config import Config, load_config
from gateway.protocol.errors import ConfigError
from gateway.serving import serve_http, serve_stream
from gateway.transports import orphans
from gateway.transports.stdio import open_own_stdio

EXIT_OK = 0
log = structlog.get_logger("gateway.cli")


async def _reload(gateway: Gateway, path: str) -> None:
    """Re-read the config; an invalid one is logged and the running one keeps serving."""
    try:
        new = load_config(path)
    except ConfigError as exc:
        log.error("reload_rejected", config=path, error=exc.message)  # noqa: TRY400 - expected: no traceback
        return
    await gateway.reload(new)


async def _handle_signals(
    running: list[Gateway], path: str, stopping: anyio.Event, forced: list[int], scope: anyio.CancelScope
) -> None:
    """SIGHUP reloads; SIGTERM/SIGINT stop gracefully. This runs until the gateway's stop is over, its
    upstreams' included: a client that closed stdin then sends SIGTERM (the SDK's does, 2 s later), and
    that SIGTERM must not end the gateway with upstreams still being stopped. A second SIGTERM/SIGINT
    SIGKILLs every process the upstreams still have and ends the gateway at once."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            if signum == signal.SIGHUP:
                if running and not stopping.is_set():
                    await _reload(running[0], path)
            elif stopping.is_set():
                leftovers = await anyio.to_thread.run_sync(orphans.kill_all)
                log.warning("killed_what_remained", signal=signal.Signals(signum).name, leftovers=leftovers)
                forced.append(signum)
                scope.cancel()
            else:
                log.info("shutting_down", signal=signal.Signals(signum).name)
                stopping.set()


async def _watch(gateway: Gateway, path: str, interval_s: float = 1.0) -> None:
    """Reload when the file changes (its mtime and size are polled: no extra dependency, works on every
    filesystem, including the bind mounts of containers)."""

    def stamp() -> tuple[float, int] | None:
        with suppress(OSError):
            info = os.stat(path)
            return info.st_mtime, info.st_size
        return None

    seen = stamp()
    while True:
        await anyio.sleep(interval_s)
        now = stamp()
        if now is None and seen is not None:  # deleted (or moved away): said once; the running config serves on
            log.warning("config_missing", config=path, detail="the running config keeps serving")
        elif now is not None and now != seen:
            log.info("config_changed", config=path)
            await _reload(gateway, path)
        seen = now


async def serve_command(config: Config, path: str, watch: bool, sock: socket.socket | None) -> int:
    """Serve until told to stop; signals are handled from before the gateway starts until it has stopped.
    Exit status 0, or 128 + the signal's number when a second one cut the stop short."""
    stopping = anyio.Event()
    running: list[Gateway] = []
    forced: list[int] = []
    async with anyio.create_task_group() as signals:
        signals.start_soon(_handle_signals, running, path, stopping, forced, signals.cancel_scope)
        serving = run_gateway(config, telemetry=True, front_end_first=True)
        async with anyio.create_task_group() as tg, serving as gateway:
            running.append(gateway)
            if watch:
                tg.start_soon(_watch, gateway, path)
            if config.server.transport == "http":
                await serve_http(gateway, stopping=stopping, sock=sock)
            else:
                stdio = open_own_stdio(max_message_bytes=config.gateway.max_message_bytes)
                await serve_stream(gateway, stdio, stopping=stopping)
            running.clear()  # stopping now (stdin may have ended, with no signal): a SIGHUP reloads nothing
            tg.cancel_scope.cancel()
        signals.cancel_scope.cancel()
    return 128 + forced[0] if forced else EXIT_OK
