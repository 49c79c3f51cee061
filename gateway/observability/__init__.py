"""How the gateway is watched: structured logs with redaction (``logs.py``), Prometheus metrics and the
health endpoints (``metrics.py``).
"""
