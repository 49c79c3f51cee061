"""Allow/deny rules on prompt names and tags. Deny wins; allow is exact, deny is deliberately broad.

``allow`` globs match the name exactly (case-sensitive), so nothing becomes visible by accident.
``deny`` globs also match a *skeleton* of the name (after Unicode TR39): default-ignorable code points
removed as a class, every character replaced by the representative of its confusable class (Unicode's
confusables data, as shipped by ``confusable-homoglyphs``), then normalised, accents, spaces and
controls removed, case-folded, and repeated separators collapsed. So ``docs__secret_*`` also hides
``docs__SECRET_x``, ``docs__ѕecret_x`` (Cyrillic s), ``docs__ꜱecret_x`` (small capital s),
``docs__secreт_x`` (Cyrillic te, which Unicode's data calls a small capital T),
``docs__secret\u200b_x``, ``docs__secret\u3164_x`` and ``docs____secret_x``: a rule written for one
spelling cannot be bypassed with another. Tags are matched the same way (``allow_tags``: some tag must
match exactly; ``deny_tags``: no tag may match, skeletons included).

A renamed prompt (an override) is judged by its public name, and deny rules also by the name it had
before the rename: a rename never shows what a deny rule hid.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import re
import string
import unicodedata
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import regex

_GLOB = frozenset("*?[]")
_IGNORABLE = regex.compile(r"[\p{Default_Ignorable_Code_Point}\u2800]+")  # and the braille blank, drawn empty
_DROPPED_CATEGORIES = frozenset({"Mn", "Me", "Cf", "Cc", "Zs", "Zl", "Zp"})


def _confusable_classes() -> dict[int, str]:
    """Each confusable character mapped to one representative of its class (an ASCII member where there
    is one); an ASCII letter and its other case are one class. The data lists confusables both ways; a
    source whose prototype is a sequence (``ʂ`` → ``s̨``) maps to the sequence. Classes holding a glob
    character are left alone: a deny pattern's skeleton must keep its wildcards, and gain none."""
    from confusable_homoglyphs import confusables  # its data loads in ~30 ms: only once a deny rule is matched

    parent: dict[str, str] = {}

    def find(ch: str) -> str:
        root = parent.setdefault(ch, ch)
        while root != parent[root]:
            root = parent[root]
        parent[ch] = root
        return root

    data: dict[str, list[dict[str, str]]] = confusables.confusables_data
    mapping: dict[int, str] = {}
    for ch, entries in data.items():
        if len(ch) != 1:
            continue
        for entry in entries:
            target = entry["c"]
            if len(target) == 1:
                parent[find(ch)] = find(target)
            elif len(entries) == 1:
                mapping[ord(ch)] = target
    for upper in string.ascii_uppercase:  # an ASCII case pair is one class too: O, o and 0 fold alike
        parent[find(upper)] = find(upper.lower())  # (not every script's pairs: they chain e to 7)
    capitals = [*string.ascii_uppercase, *(ch for ch in list(parent) if ch.isupper())]
    for small_capital, capital in _small_capitals(capitals):  # the data maps т to ᴛ, and ᴛ to no T
        parent[find(small_capital)] = find(capital)
    classes: dict[str, list[str]] = {}
    for ch in list(parent):
        classes.setdefault(find(ch), []).append(ch)
    for members in classes.values():
        if _GLOB & set(members):
            continue
        representative = min(members, key=lambda c: (not c.isascii(), ord(c)))
        mapping.update({ord(m): representative for m in members if m != representative})
    return {k: v for k, v in mapping.items() if chr(k) not in _GLOB and not _GLOB & set(v)}


_CAPITAL = regex.compile(r"^(?P<script>[A-Z]+) CAPITAL LETTER (?P<letter>.+)$")
_SMALL_CAPITAL_NAMES = (
    "{script} LETTER SMALL CAPITAL {letter}",
    "{script} SMALL CAPITAL LETTER {letter}",
    "MODIFIER LETTER SMALL CAPITAL {letter}",
    "{script} CAPITAL LETTER SMALL CAPITAL {letter}",
)


def _small_capitals(letters: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Each small capital (``ᴛ``, ``ꜰ``, ``ᴦ``, modifier forms too) of these letters' capitals, and that
    capital, by their Unicode names: ``LATIN CAPITAL LETTER T`` has ``LATIN LETTER SMALL CAPITAL T``.
    Combining small capitals are not looked for: they stay marks, and marks are dropped."""
    for capital in letters:
        found = _CAPITAL.match(unicodedata.name(capital, ""))
        if found is None:
            continue
        for pattern in _SMALL_CAPITAL_NAMES:
            with contextlib.suppress(KeyError):
                yield unicodedata.lookup(pattern.format_map(found.groupdict())), capital


@functools.cache
def _confusables() -> dict[int, str]:
    """Built on first use (tens of milliseconds): a gateway without deny rules never needs it."""
    return _confusable_classes()


def _fold(text: str) -> str:
    confusables = _confusables()
    text = _IGNORABLE.sub("", text).casefold().translate(confusables)  # before NFKC, which turns ϲ into ς
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    text = "".join(ch for ch in text if unicodedata.category(ch) not in _DROPPED_CATEGORIES and not ch.isspace())
    return _IGNORABLE.sub("", text.casefold()).translate(confusables)


@functools.lru_cache(maxsize=16_384)  # listings ask the same names again and again; ~30 µs each to fold
def skeleton(name: str, separator: str = "") -> str:
    """The form deny rules are matched against in addition to the name itself."""
    text = _fold(name)
    for _ in range(3):  # folding can expose a character that folds further (a sequence, a case pair)
        again = _fold(text)
        if again == text:
            break
        text = again
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


class RuleSettings(Protocol):
    """The configured form of one policy (``config.PolicyRules``)."""

    @property
    def allow(self) -> tuple[str, ...]: ...
    @property
    def deny(self) -> tuple[str, ...]: ...
    @property
    def allow_tags(self) -> tuple[str, ...] | None: ...
    @property
    def deny_tags(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class _DenyGlobs:
    """Deny globs, matched against a string and against its skeleton."""

    patterns: tuple[str, ...]
    separator: str
    _exact: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _skeleton: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_exact", _compile(self.patterns))
        object.__setattr__(self, "_skeleton", _compile(skeleton(p, self.separator) for p in self.patterns))

    def match(self, text: str) -> bool:
        if self._exact is None or self._skeleton is None:
            return False
        return bool(self._exact.match(text) or self._skeleton.match(skeleton(text, self.separator)))

    def which(self, text: str) -> tuple[str, bool] | None:
        """The pattern that matches ``text`` and whether only as a look-alike (its skeleton), or None.
        Asked only after :meth:`match` said yes (``explain``): the serving path keeps the one regex."""
        if not self.match(text):
            return None
        folded = skeleton(text, self.separator)
        for pattern in self.patterns:
            if fnmatch.fnmatchcase(text, pattern):
                return pattern, False
        for pattern in self.patterns:
            if fnmatch.fnmatchcase(folded, skeleton(pattern, self.separator)):
                return pattern, True
        return self.patterns[0], True  # (unreachable: the union matched, so one of its parts does)


@dataclass(frozen=True)
class Rules:
    """One allow/deny list; ``separator`` lets the deny skeleton collapse doubled separators."""

    allow: tuple[str, ...] = ("*",)
    deny: tuple[str, ...] = ()
    separator: str = ""
    allow_tags: tuple[str, ...] | None = None
    deny_tags: tuple[str, ...] = ()
    _allow: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _deny: _DenyGlobs = field(init=False, repr=False, compare=False)
    _allow_tags: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _deny_tags: _DenyGlobs = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_allow", _compile(self.allow))
        object.__setattr__(self, "_deny", _DenyGlobs(self.deny, self.separator))
        object.__setattr__(self, "_allow_tags", None if self.allow_tags is None else _compile(self.allow_tags))
        object.__setattr__(self, "_deny_tags", _DenyGlobs(self.deny_tags, ""))

    @classmethod
    def of(cls, settings: RuleSettings, separator: str) -> Rules:
        return cls(settings.allow, settings.deny, separator, settings.allow_tags, settings.deny_tags)

    @property
    def key(self) -> str:
        """Stable across processes and reloads for the same rules (a cursor carries it)."""
        return _rules_key(self.allow, self.deny, self.allow_tags, self.deny_tags)

    def denies(self, name: str, tags: Collection[str] = (), *, original: str | None = None) -> bool:
        """Whether a deny rule hides this prompt: by its name, the name it had before a rename, or a tag."""
        return (
            self._deny.match(name)
            or (original is not None and original != name and self._deny.match(original))
            or any(self._deny_tags.match(tag) for tag in tags)
        )

    def allows(self, name: str, tags: Collection[str] = (), *, original: str | None = None) -> bool:
        """Deny wins; otherwise some allow glob must match the exact name (and, with ``allow_tags``, some
        allowed tag one of the prompt's tags)."""
        if self.denies(name, tags, original=original):
            return False
        if self._allow is None or not self._allow.match(name):
            return False
        if self.allow_tags is None:
            return True
        return self._allow_tags is not None and any(self._allow_tags.match(tag) for tag in tags)

    def decide(self, name: str, tags: Collection[str] = (), *, original: str | None = None) -> Decision:
        """What :meth:`allows` answers, and the rule that made it so (``explain``)."""
        allowed = self.allows(name, tags, original=original)
        found = self._deny.which(name)
        if found is not None:
            return Decision(False, f"deny {found[0]!r}", "a look-alike of the name" if found[1] else "the name")
        if original is not None and original != name:
            found = self._deny.which(original)
            if found is not None:
                return Decision(False, f"deny {found[0]!r}", f"its name before the rename, {original!r}")
        for tag in tags:
            found = self._deny_tags.which(tag)
            if found is not None:
                return Decision(
                    False, f"deny_tags {found[0]!r}", f"its tag {tag!r}" + (", a look-alike" if found[1] else "")
                )
        if self._allow is None or not self._allow.match(name):
            return Decision(False, f"allow {list(self.allow)!r}", "no allow pattern matches the name exactly")
        if self.allow_tags is not None and not allowed:
            return Decision(False, f"allow_tags {list(self.allow_tags)!r}", f"none of its tags {sorted(tags)!r}")
        pattern = next(p for p in self.allow if fnmatch.fnmatchcase(name, p))
        because = f"allow {pattern!r}"
        if self.allow_tags is not None:
            tag = next(t for t in tags if any(fnmatch.fnmatchcase(t, p) for p in self.allow_tags))
            because += f" and allow_tags, for its tag {tag!r}"
        assert allowed  # noqa: S101 - the same predicates as allows(); a difference is a defect here
        return Decision(True, because, "the name")

    def may_allow_under(self, prefix: str) -> bool:
        """Whether some name starting with ``prefix`` could be allowed: no deny glob ending in ``*`` covers
        the whole prefix, and some allow glob can begin with it. Errs towards True (it is used to decide
        whether a caller may learn that an upstream is down, never to show a prompt)."""
        if any(p.endswith("*") and fnmatch.fnmatchcase(prefix, p) for p in self.deny):
            return False
        if self.allow_tags == ():
            return False
        return any(_can_begin_with(p, prefix) for p in self.allow)


ALLOW_ALL = Rules()


@dataclass(frozen=True, slots=True)
class Decision:
    """One policy's answer for one prompt: shown or not, the rule that decided, what of the prompt it
    matched (the name, a look-alike of it, its name before a rename, a tag)."""

    allowed: bool
    rule: str
    matched: str


@functools.lru_cache(maxsize=1024)
def _rules_key(
    allow: tuple[str, ...], deny: tuple[str, ...], allow_tags: tuple[str, ...] | None, deny_tags: tuple[str, ...]
) -> str:
    if allow_tags is None and not deny_tags:  # the key rules without tags always had
        return hashlib.sha256(repr((allow, deny)).encode()).hexdigest()[:8]
    return hashlib.sha256(repr((allow, deny, allow_tags, deny_tags)).encode()).hexdigest()[:8]


class Viewer(Protocol):
    """What one caller may see: a static token's rules, or every view a person's token matches."""

    @property
    def key(self) -> str:
        """Tells views apart (a listing cursor minted under one view is refused under another)."""

    def allows(self, name: str, tags: Collection[str] = (), *, original: str | None = None) -> bool: ...

    def may_allow_under(self, prefix: str) -> bool: ...


@dataclass(frozen=True)
class AllOf:
    """Several rules at once: a name is visible only if every one allows it (deny wins everywhere)."""

    rules: tuple[Rules, ...]
    key: str

    def allows(self, name: str, tags: Collection[str] = (), *, original: str | None = None) -> bool:
        return all(rule.allows(name, tags, original=original) for rule in self.rules)

    def may_allow_under(self, prefix: str) -> bool:
        return all(rule.may_allow_under(prefix) for rule in self.rules)
