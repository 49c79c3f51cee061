"""The unified catalog: upstreams mounted under their namespaces (``mounts.py``), merged and paginated
with the sealed composite cursor, routed by exact name (``catalog.py``), shaped by overrides, filtered
by policy, and offered as two tools. Sans-IO but for the sources it awaits.
"""
