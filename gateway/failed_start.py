"""When ``serve`` cannot start (a config error: bad TOML, an unset ``${VAR}`` outside an upstream...).

An MCP client that launched the gateway over stdio sees only its stdout close and says "Connection
closed"; what the gateway printed is in a log file the user may never find. So the reason is said
where the client shows it: every request the client sends (its ``initialize``, or its
``server/discover`` probe and then ``initialize``) is answered with a JSON-RPC error whose message is
the reason, until the client hangs up, or has said nothing for ``IDLE_S``; then the gateway exits with
the config error's status. The reason also goes to stderr on one line (clients log stderr line by
line). A gateway meant to serve HTTP, or run from a terminal, just exits.
"""

from __future__ import annotations

import os
import tomllib
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio

from gateway.protocol.errors import ConfigError
from gateway.protocol.jsonrpc import Request, decode, encode, error_response
from gateway.transports.base import MessageTooLarge
from gateway.transports.stdio import open_own_stdio

IDLE_S = 30.0
"""How long a client that launched a gateway which cannot start may stay silent before it exits: it
has had its answer (or never asks), and a process it forgot must not linger."""


def one_line(message: str) -> str:
    """A multi-line reason (``invalid configuration:`` and its problems) as one line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {'; '.join(lines[1:])}"
    return "; ".join(lines)


def meant_for_stdio(config_path: str) -> bool:
    """Whether an MCP client may be waiting on stdin/stdout: the config serves stdio (its default) as far
    as the file can be read, and stdin is not a terminal (a person there reads stderr)."""
    if os.isatty(0):
        return False
    transport: Any = "stdio"
    with suppress(OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        text = Path(config_path).read_text(encoding="utf-8")
        transport = tomllib.loads(text).get("server", {}).get("transport", "stdio")
    return bool(transport != "http")


async def answer_until_hangup(reason: str, *, idle_s: float = IDLE_S) -> None:
    """Answer each request on stdin with the reason (notifications and answers need none) until stdin
    ends or stays quiet for ``idle_s``."""
    error = ConfigError(f"prompt-gateway could not start: {reason}")
    stream = open_own_stdio()
    try:
        while True:
            frame = None
            with anyio.move_on_after(idle_s):
                try:
                    frame = await stream.receive()
                except anyio.EndOfStream:
                    return
                except MessageTooLarge:
                    continue
            if frame is None:
                return
            try:
                message = decode(frame)
            except Exception:  # noqa: S112 - not a request: nothing to answer, whatever it is
                continue
            if isinstance(message, Request):
                await stream.send(encode(error_response(message.id, error)))
    except (anyio.BrokenResourceError, OSError):
        return  # the client is gone
    finally:
        await stream.aclose()
