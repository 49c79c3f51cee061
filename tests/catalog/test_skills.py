"""Skills in the catalog: the rules that decide which prompts show decide which skills show (global,
upstream, viewer; deny wins; look-alike spellings; tags), and a hidden skill is answered as an absent one."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.mounts import Mount
from gateway.catalog.policy import ALLOW_ALL, Rules
from gateway.config import PromptOverride
from gateway.protocol.errors import InvalidParams
from gateway.testing import FakeSkillSource

pytestmark = pytest.mark.anyio


def front(name: str, tags: str = "") -> bytes:
    return f"---\nname: {name}\ndescription: d\n{tags}---\nbody\n".encode()


def catalog(policy: Rules = ALLOW_ALL, rules: Rules = ALLOW_ALL, **overrides: PromptOverride) -> Catalog:
    source = FakeSkillSource("s")
    source.add_skill("pdf", {"SKILL.md": front("pdf"), "a.md": b"a"})
    source.add_skill("secret-plan", {"SKILL.md": front("secret-plan")})
    source.add_skill("Billing/refunds", {"SKILL.md": front("refunds")})
    source.add_skill("wiki", {"SKILL.md": front("wiki", "tags: [internal]\n")})
    mount = Mount(source, prefix="s__", rules=rules, overrides=overrides)
    return Catalog([mount], codec=CursorCodec(b"k" * 32), generation="g", policy=policy)


async def listed(c: Catalog, viewer: Rules | None = None) -> list[str]:
    return [s["uri"] for s in (await c.skills.list_skills({}, viewer=viewer))["skills"]]


async def hidden(c: Catalog, uri: str, viewer: Rules | None = None) -> bool:
    """Whether every way to reach the skill at ``uri`` answers as if it were not there."""
    calls: list[tuple[Any, dict[str, Any]]] = [
        (c.skills.get_skill, {"uri": uri}),
        (c.skills.read_resource, {"uri": uri}),
        (c.skills.read_directory, {"uri": uri.removesuffix("/SKILL.md")}),
    ]
    for method, params in calls:
        with pytest.raises(InvalidParams):
            await method(params, viewer=viewer)
    resources = (await c.skills.list_resources({}, viewer=viewer))["resources"]
    return uri not in {r["uri"] for r in resources}


async def test_every_skill_shows_without_rules() -> None:
    assert await listed(catalog()) == [
        "skill://s/Billing/refunds/SKILL.md",
        "skill://s/pdf/SKILL.md",
        "skill://s/secret-plan/SKILL.md",
        "skill://s/wiki/SKILL.md",
    ]


async def test_the_global_policy_hides_a_skill_everywhere_and_deny_wins_over_look_alikes() -> None:
    c = catalog(Rules(deny=("s__secret*", "s__billing/*"), separator="__"))
    assert await listed(c) == ["skill://s/pdf/SKILL.md", "skill://s/wiki/SKILL.md"]
    assert await hidden(c, "skill://s/secret-plan/SKILL.md")
    assert await hidden(c, "skill://s/Billing/refunds/SKILL.md")  # the deny's skeleton folds case
    directory = await c.skills.read_directory({"uri": "skill://s"}, viewer=None)
    assert [r["name"] for r in directory["resources"]] == ["pdf", "wiki"]


async def test_a_viewer_sees_only_what_its_own_rules_allow() -> None:
    c = catalog()
    viewer = Rules(allow=("s__pdf",), separator="__")
    assert await listed(c, viewer) == ["skill://s/pdf/SKILL.md"]
    assert await hidden(c, "skill://s/wiki/SKILL.md", viewer)
    assert len(await listed(c)) == 4  # others are not affected
    assert (await c.skills.list_skills({}, viewer=viewer))["cacheScope"] == "private"


async def test_the_upstreams_own_policy_and_tags_from_front_matter_and_overrides() -> None:
    c = catalog(rules=Rules(deny=("pdf",)), policy=Rules(deny_tags=("internal", "legal")))
    assert await listed(c) == ["skill://s/Billing/refunds/SKILL.md", "skill://s/secret-plan/SKILL.md"]
    tagged = catalog(policy=Rules(deny_tags=("legal",)), **{"secret-plan": PromptOverride(tags=("legal",))})
    assert await hidden(tagged, "skill://s/secret-plan/SKILL.md")
