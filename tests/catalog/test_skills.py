"""Skills in the catalog: the rules that decide which prompts show decide which skills show (global,
upstream, viewer; deny wins; look-alike spellings; tags), and a hidden skill is answered as an absent one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.mounts import Mount
from gateway.catalog.policy import ALLOW_ALL, Rules
from gateway.config import PromptOverride
from gateway.protocol.errors import InvalidParams
from gateway.sources.files.skills import read_skill
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


async def test_file_names_a_uri_would_misread_are_escaped_and_read_back_by_that_spelling_only() -> None:
    """A tester's skill held ``a#b.txt``, ``what?.txt``, ``100%.txt`` and ``my notes.md``: served as
    ``skill://team/odd/a#b.txt``, which a client parsing URIs reads as ``a`` with a fragment (the escaped
    spelling answered "not found")."""
    source = FakeSkillSource("s")
    names = {"a#b.txt": "a%23b.txt", "what?.txt": "what%3F.txt", "100%.txt": "100%25.txt"}
    names |= {"my notes/x.md": "my%20notes/x.md", "café.md": "caf%C3%A9.md", "plain-1.0_~.md": "plain-1.0_~.md"}
    source.add_skill("odd", {"SKILL.md": front("odd"), **{name: name.encode() for name in names}})
    c = Catalog([Mount(source, prefix="s__")], codec=CursorCodec(b"k" * 32), generation="g", policy=ALLOW_ALL)
    [entry] = (await c.skills.list_skills({}, viewer=None))["skills"]
    assert sorted(r["uri"] for r in entry["resources"]) == sorted(
        ["skill://s/odd/SKILL.md", *(f"skill://s/odd/{escaped}" for escaped in names.values())]
    )
    for name, escaped in names.items():
        read = await c.skills.read_resource({"uri": f"skill://s/odd/{escaped}"}, viewer=None)
        assert read["contents"][0]["uri"] == f"skill://s/odd/{escaped}"
        assert read["contents"][0]["text"] == name
        if escaped != name:  # one spelling for each file
            with pytest.raises(InvalidParams):
                await c.skills.read_resource({"uri": f"skill://s/odd/{name}"}, viewer=None)
    folder = await c.skills.read_directory({"uri": "skill://s/odd"}, viewer=None)
    assert {r["name"]: r["uri"] for r in folder["resources"]}["my notes"] == "skill://s/odd/my%20notes"
    inner = await c.skills.read_directory({"uri": "skill://s/odd/my%20notes"}, viewer=None)
    assert [r["uri"] for r in inner["resources"]] == ["skill://s/odd/my%20notes/x.md"]


def _skill_with_a_latin1_file_name(tmp_path: Path) -> Any:
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: odd\ndescription: d\n---\n")
    Path(os.fsdecode(os.fsencode(folder) + b"/caf\xe9.txt")).write_bytes(b"latin")  # (a name in bytes)
    return read_skill(folder, "odd", "odd/SKILL.md")


async def test_a_file_name_that_is_not_utf8_is_listed_and_read_by_its_bytes_escaped(tmp_path: Path) -> None:
    """A Latin-1 file name (as an old archive leaves it) is read as surrogate escapes; escaping it for its
    URI raised UnicodeEncodeError, and every skill listing failed with it (found by a reviewer)."""
    source = FakeSkillSource("s")
    source.skills["odd"] = _skill_with_a_latin1_file_name(tmp_path)
    c = Catalog([Mount(source, prefix="s__")], codec=CursorCodec(b"k" * 32), generation="g", policy=ALLOW_ALL)
    [entry] = (await c.skills.list_skills({}, viewer=None))["skills"]
    assert sorted(r["uri"] for r in entry["resources"]) == ["skill://s/odd/SKILL.md", "skill://s/odd/caf%E9.txt"]
    assert len((await c.skills.list_resources({}, viewer=None))["resources"]) == 2
    read = await c.skills.read_resource({"uri": "skill://s/odd/caf%E9.txt"}, viewer=None)
    assert read["contents"][0]["text"] == "latin"
