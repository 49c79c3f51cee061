"""Who asks, and what they may see: typed identities (``principal.py``), OAuth access tokens and the
protected-resource metadata, views from claims, per-identity shares, and the audit trail. Resolved once
at the edge; the catalog only ever sees a view.
"""
