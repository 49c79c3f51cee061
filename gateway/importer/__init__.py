"""``prompt-gateway import``: a client's MCP config read as that client reads it (``clients.py``), written
as a validated gateway config (``writer.py``). A tool beside the data flow, not in it.
"""
