"""The keys of the gateway's own in ``_meta`` (namespaced ``prompt-gateway/``, as the spec asks of keys
that are not the protocol's): what every stage that writes or reads them shares."""

from __future__ import annotations

TAGS_META_KEY = "prompt-gateway/tags"
"""Where a listed prompt's tags are, in its ``_meta``."""
UNAVAILABLE_META_KEY = "prompt-gateway/unavailable"
"""Where a listing names the upstreams it could not include, in its ``_meta``."""
