"""What replicas share: the sealing AEAD (``sealing.py``), sealed session ids (``session_ids.py``) and,
with Redis, everything a sealed id cannot carry (``replicas.py``).
"""
