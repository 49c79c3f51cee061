"""A real uvicorn server on a free loopback port for the transport tests, serving an app until the
block ends (``config`` goes to ``uvicorn.Config``: the connection guard's protocol, for one)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import uvicorn


@asynccontextmanager
async def serving(app: Any, **config: Any) -> AsyncIterator[int]:
    """The port ``app`` is served on, until the block ends."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="off", **config))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(sockets=[sock]))
        with anyio.fail_after(10):
            while not server.started:
                await anyio.sleep(0.01)
        try:
            yield sock.getsockname()[1]
        finally:
            server.should_exit = True
