"""Sans-IO protocol core: JSON-RPC framing, MCP revisions and wire validation. No I/O happens here."""
