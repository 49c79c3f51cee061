"""The HTTP front end: the app and its routes (``server.py``), Streamable HTTP, the stateless 2026-07-28
path and legacy HTTP+SSE, the session store they share (``sessions.py``), the request guard (``guard.py``)
and the connection bounds before any request is read (``connection_guard.py``).
"""
