"""Allow/deny rules on prompt names. Deny wins; allow is exact, deny is deliberately broad.

``allow`` globs match the name exactly (case-sensitive), so nothing becomes visible by accident.
``deny`` globs also match a *skeleton* of the name: Unicode-normalised, accents and invisible
characters removed, case-folded, common Cyrillic/Greek look-alikes mapped to Latin, whitespace dropped
and repeated separators collapsed. So ``docs__secret_*`` also hides ``docs__SECRET_x``,
``docs__ѕecret_x`` (Cyrillic s), ``docs__secret\u200b_x`` and ``docs____secret_x``: a rule written
for one spelling cannot be bypassed with another.
"""

from __future__ import annotations

import fnmatch
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

# Letters that render like Latin ones in common fonts (after case folding). Not exhaustive: the
# skeleton closes the cheap bypasses; the exact-name routing in the catalog closes the rest.
_LOOKALIKES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "і": "i", "ї": "i", "ј": "j", "к": "k",
    "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s",
    "ԁ": "d", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w", "ɡ": "g", "ı": "i",
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ϲ": "c", "ϳ": "j",
})  # fmt: skip


def skeleton(name: str, separator: str = "") -> str:
    """The form deny rules are matched against in addition to the name itself."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", name))
    text = "".join(
        ch
        for ch in text
        if unicodedata.category(ch) not in ("Mn", "Me", "Cf", "Cc", "Zs", "Zl", "Zp") and not ch.isspace()
    )
    text = text.casefold().translate(_LOOKALIKES)
    if separator:
        folded_sep = skeleton(separator)
        if folded_sep:
            text = re.sub(f"(?:{re.escape(folded_sep)}){{2,}}", folded_sep, text)
    return text


def _can_begin_with(pattern: str, prefix: str) -> bool:
    """Whether some string matching the glob ``pattern`` starts with ``prefix`` (a ``[...]`` class is
    taken to match any one character)."""
    i = 0
    for ch in prefix:
        if i >= len(pattern):
            return False
        part = pattern[i]
        if part == "*":
            return True
        if part == "[":
            end = pattern.find("]", i + 2)
            i = end + 1 if end > 0 else i + 1
            continue
        if part not in ("?", ch):
            return False
        i += 1
    return True


def _compile(patterns: Iterable[str]) -> re.Pattern[str] | None:
    parts = [fnmatch.translate(p) for p in patterns]
    return re.compile("|".join(parts)) if parts else None


@dataclass(frozen=True)
class Rules:
    """One allow/deny list; ``separator`` lets the deny skeleton collapse doubled separators."""

    allow: tuple[str, ...] = ("*",)
    deny: tuple[str, ...] = ()
    separator: str = ""
    _allow: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _deny: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _deny_skeleton: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_allow", _compile(self.allow))
        object.__setattr__(self, "_deny", _compile(self.deny))
        object.__setattr__(self, "_deny_skeleton", _compile(skeleton(p, self.separator) for p in self.deny))

    def denies(self, name: str) -> bool:
        if self._deny is None or self._deny_skeleton is None:
            return False
        return bool(self._deny.match(name) or self._deny_skeleton.match(skeleton(name, self.separator)))

    def allows(self, name: str) -> bool:
        """Deny wins; otherwise some allow glob must match the exact name."""
        if self.denies(name):
            return False
        return self._allow is not None and bool(self._allow.match(name))

    def may_allow_under(self, prefix: str) -> bool:
        """Whether some name starting with ``prefix`` could be allowed: no deny glob ending in ``*`` covers
        the whole prefix, and some allow glob can begin with it. Errs towards True (it is used to decide
        whether a caller may learn that an upstream is down, never to show a prompt)."""
        if any(p.endswith("*") and fnmatch.fnmatchcase(prefix, p) for p in self.deny):
            return False
        return any(_can_begin_with(p, prefix) for p in self.allow)


ALLOW_ALL = Rules()
