"""FastMCP's proxy over the same upstreams: ``python -m bench.fastmcp_proxy stdio|http CONFIG_JSON``.

CONFIG_JSON is an ``mcpServers`` object; every upstream is mounted with its name as namespace, as
PEERS.md describes. Over http the port is printed first, like the other benchmark servers.
"""

from __future__ import annotations

import json
import socket
import sys

from fastmcp import FastMCP
from fastmcp.server import create_proxy


def main() -> None:
    transport, servers = sys.argv[1], json.loads(sys.argv[2])
    gateway = FastMCP("peer")
    for name, spec in servers.items():
        gateway.mount(create_proxy({"mcpServers": {name: spec}}, mode="auto"), namespace=name)
    if transport == "stdio":
        gateway.run(transport="stdio", show_banner=False)
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    print(port, flush=True)
    gateway.run(transport="http", host="127.0.0.1", port=port, show_banner=False, log_level="error")


if __name__ == "__main__":
    main()
