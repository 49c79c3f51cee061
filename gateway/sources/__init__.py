"""Where prompts come from: the upstream connector (one MCP server kept connected, ``upstream.py``), a
directory of prompt files (``files/``), and what crosses from an upstream to a client (requests to
clients, progress). Below them: rpc and the transports.
"""
