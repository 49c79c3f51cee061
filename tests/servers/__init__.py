"""The test servers, each a process of its own (``python -m tests.servers.NAME``). Their package is imported
first, so its first import holds the garbage collector off while the server's own imports run (the MCP SDK,
pydantic: ``gateway/start_up.py`` says why); each server calls ``start_up.resume()`` after its last import.
``fastmcp_legacy.py`` is the exception: run as a file in a venv of its own, without the gateway."""

from gateway import start_up  # noqa: F401 - imported for its effect, before anything else
