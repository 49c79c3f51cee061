"""Upstream MCP servers for the tests, written with the official ``mcp`` SDK (as real servers are)."""
