"""The floor of the stdio gateway's own stack: a bare relay made of exactly the gateway's stdio transport
(``open_own_stdio`` towards the client, ``open_child`` starting the upstream, both newline-framed streams)
and nothing else: no JSON read or written, no RPC peer, no routing, policy, audit or metrics.

Each frame the client writes goes to the upstream's stdin as it came, and each frame the upstream writes
goes back to the client. Measured beside the stdio gateway in the ``gets`` section (and by
``bench.instructions``), its CPU per request is the least a gateway on this transport could spend; the
difference to the gateway's is what the gateway's own work costs over stdio.

Usage: ``python -m bench.stdio_relay COMMAND [ARG...]`` (the upstream server's command line).
"""

from __future__ import annotations

import sys

import anyio

from gateway.transports.base import MessageTooLarge, NewlineFramedStream
from gateway.transports.stdio import ChildSpec, open_child, open_own_stdio


async def _pump(source: NewlineFramedStream, sink: NewlineFramedStream) -> None:
    while True:
        try:
            frame = await source.receive()
        except anyio.EndOfStream:
            return
        except MessageTooLarge:  # dropped, as the gateway drops it
            continue
        await sink.send(frame)


async def relay(command: list[str]) -> None:
    client = open_own_stdio()
    child = open_child(ChildSpec(command[0], command[1:]), on_stderr_line=lambda _line: None)
    async with child as (upstream, _), anyio.create_task_group() as tg:
        tg.start_soon(_pump, upstream, client)
        await _pump(client, upstream)  # the client closed stdin: the upstream is stopped with it
        tg.cancel_scope.cancel()


def main() -> None:
    anyio.run(relay, sys.argv[1:], backend_options={"use_uvloop": True})


if __name__ == "__main__":
    main()
