"""mcp-prompt-gateway: one MCP endpoint serving the prompts of many MCP servers."""

__version__ = "0.1.0"

__all__ = ["__version__"]
