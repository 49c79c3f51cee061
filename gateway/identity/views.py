"""Views from token claims: which configured views a person's access token matches, and the one viewer
that results (the global policy is applied by the catalog; every matching view narrows it, deny wins).

Claims come from tokens an identity provider signed, but their shapes are still the provider's (and an
attacker's, for a provider that lets users name their own groups): a claim may be missing, a string, an
array, a number, nested, huge. Only strings count, compared exactly (a look-alike group name is another
group), and at most ``MAX_VALUES`` of an array are read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gateway.catalog.policy import AllOf, Rules, Viewer
from gateway.config import ClaimMatch, ViewSettings

MAX_VALUES = 256
MAX_DEPTH = 8
SPACE_SEPARATED = frozenset({"scope", "scp"})
"""OAuth's scope claims: one string holding several values separated by spaces (RFC 8693, RFC 9068)."""


def claim_values(claims: Mapping[str, Any], path: str) -> list[str] | None:
    """The strings a claim holds (None when the token lacks it). ``a.b`` looks inside ``a``; a key that
    itself contains dots (``https://example.com/groups``) is tried whole first."""
    value: Any = claims
    if path in claims:
        value = claims[path]
    else:
        for depth, part in enumerate(path.split(".")):
            if depth >= MAX_DEPTH or not isinstance(value, Mapping) or part not in value:
                return None
            value = value[part]
    if isinstance(value, str):
        last = path.rsplit(".", 1)[-1]
        return value.split()[:MAX_VALUES] if last in SPACE_SEPARATED else [value]
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return [item for item in list(value[:MAX_VALUES]) if isinstance(item, str)]
    return []


def matches(match: ClaimMatch, claims: Mapping[str, Any]) -> bool:
    values = claim_values(claims, match.claim)
    if match.none_of:
        return values is None or not set(values) & set(match.none_of)
    if values is None:
        return False
    if match.any_of:
        return bool(set(values) & set(match.any_of))
    return match.ends_with is not None and any(v.endswith(match.ends_with) for v in values)


class ClaimViews:
    """The configured views, compiled once per config."""

    def __init__(self, views: Iterable[ViewSettings], separator: str) -> None:
        self._views = [(view, Rules.of(view.policy, separator)) for view in views]

    def matching(self, claims: Mapping[str, Any]) -> list[tuple[str, Rules]]:
        """The views a token with these claims matches, by name, with their rules (``explain`` names them)."""
        return [(view.name, rules) for view, rules in self._views if matches(view.match, claims)]

    def viewer_for(self, claims: Mapping[str, Any], extra: Sequence[Rules] = ()) -> Viewer | None:
        """The viewer for a token with these claims (``extra``: rules that apply anyway), or None when
        nothing narrows the global policy."""
        matched = self.matching(claims)
        rules = tuple(r for _, r in matched) + tuple(extra)
        if not rules:
            return None
        if len(rules) == 1:
            return rules[0]
        return AllOf(rules, key=hashlib.sha256("+".join(r.key for r in rules).encode()).hexdigest()[:8])
