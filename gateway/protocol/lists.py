"""Which of the lists a client holds a change touches: the prompts (and the tools made of them, where
prompts are served as tools) or the skills (served as resources). An upstream's prompt list changing says
nothing of its skills, nor the other way round; a connection made or lost, a reload, or a folder that
went away touches both. A client is told only of the lists that changed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

Lists = frozenset[str]
PROMPTS: Final[Lists] = frozenset({"prompts"})
SKILLS: Final[Lists] = frozenset({"skills"})
EVERY_LIST: Final[Lists] = PROMPTS | SKILLS
NO_LIST: Final[Lists] = frozenset()


def united(changed: Mapping[str, Lists] | None) -> Lists:
    """Every list some upstream's change touched (``changed`` by namespace; None: anything changed)."""
    return EVERY_LIST if changed is None else NO_LIST.union(*changed.values())


OnChange = Callable[[str, Lists], None]
"""What an upstream's source calls when lists of its changed: ``on_change(namespace, lists)``."""
