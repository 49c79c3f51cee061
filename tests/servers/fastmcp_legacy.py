"""A FastMCP server as people wrote them with mcp 1.8.1 (May 2025): run by the interop tests in a venv of
its own (``interop/requirements-mcp-1.8.1.txt``), never imported by the suite's own environment.

Over stdio it exits on a method it does not know (``server/discover``, the gateway's era probe); over
Streamable HTTP (``streamable-http`` argument, ``FASTMCP_PORT``) it answers ``POST /mcp`` with 307 to
``/mcp/``. Both are what the gateway has to cope with.
"""

import sys

from mcp.server.fastmcp import FastMCP

app = FastMCP("legacy-fastmcp")


@app.prompt()
def greet(name: str) -> str:
    """Greets someone by name."""
    return f"Hello, {name}! (from mcp 1.8.1)"


if __name__ == "__main__":
    app.run(transport=sys.argv[1] if len(sys.argv) > 1 else "stdio")
