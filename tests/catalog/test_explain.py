"""``explain`` answers as serving does: ``Rules.decide`` agrees with ``Rules.allows`` on any name and
rules (look-alikes included), and the catalog's explanations show exactly what a listing shows the same
caller, with the rule, the view, the rename and the collision that decided."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.explain import Layer
from gateway.catalog.mounts import Mount
from gateway.catalog.policy import Rules
from gateway.config import ClaimMatch, PolicyRules, PromptOverride, ViewSettings
from gateway.identity.views import ClaimViews
from gateway.protocol.errors import GatewayError
from gateway.testing import FakePromptSource

SEP = "__"
names = st.text(st.sampled_from("abcsSѕ_-*0Оo\u200b"), min_size=1, max_size=12)
globs = st.lists(st.text(st.sampled_from("abcs_*?Oo"), min_size=1, max_size=6), max_size=3).map(tuple)
tag_lists = st.lists(st.sampled_from(["draft", "DRAFT", "reviewed", "ops"]), max_size=2).map(tuple)


@settings(max_examples=300)
@given(names, tag_lists, globs, globs, st.none() | globs, globs, st.none() | names)
def test_decide_agrees_with_allows_and_names_a_rule(
    name: str,
    tags: tuple[str, ...],
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    allow_tags: tuple[str, ...] | None,
    deny_tags: tuple[str, ...],
    original: str | None,
) -> None:
    rules = Rules(allow, deny, SEP, allow_tags, deny_tags)
    decision = rules.decide(name, tags, original=original)
    assert decision.allowed == rules.allows(name, tags, original=original)
    assert decision.rule
    if not decision.allowed and decision.rule.startswith("deny"):
        pattern = decision.rule.split(" ", 1)[1].strip("'\"")
        assert pattern in deny or pattern in deny_tags


def test_a_look_alike_is_explained_as_one() -> None:
    decision = Rules(deny=("docs__secret_*",), separator=SEP).decide("docs__ѕecret_x")  # Cyrillic s
    assert (decision.allowed, decision.rule, decision.matched) == (
        False,
        "deny 'docs__secret_*'",
        "a look-alike of the name",
    )


CONTRACTORS = ViewSettings(
    name="contractors",
    match=ClaimMatch(claim="groups", any_of=("contractors",)),
    policy=PolicyRules(deny=("eng__*",)),
)
DRAFTS = ViewSettings(
    name="no-drafts", match=ClaimMatch(claim="groups", any_of=("contractors", "staff")), policy=PolicyRules()
)


def catalog() -> Catalog:
    eng = FakePromptSource("eng", [{"name": "review"}, {"name": "internal_dump"}, {"name": "shared"}])
    docs = FakePromptSource("docs", [{"name": "guide"}, {"name": "old_name"}])
    other = FakePromptSource("other", [{"name": "shared"}])
    renamed = {"old_name": PromptOverride(name="docs__handbook", description="The handbook")}
    return Catalog(
        [
            Mount(eng, prefix="", rules=Rules(deny=("internal_*",), separator=SEP)),
            Mount(docs, prefix="docs__", overrides=renamed),
            Mount(other, prefix=""),
        ],
        codec=CursorCodec(b"k" * 32),
        generation="g",
        policy=Rules(deny=("docs__old_*",), separator=SEP),
    )


@pytest.mark.anyio
@pytest.mark.parametrize("claims", [{"groups": ["contractors"]}, {"groups": ["staff"]}, {}])
async def test_the_explanations_show_what_a_listing_shows_the_same_person(claims: dict[str, object]) -> None:
    cat = catalog()
    views = ClaimViews([CONTRACTORS, DRAFTS], SEP)
    listed = {p["name"] for p in (await cat.all_prompts(viewer=views.viewer_for(claims)))["prompts"]}
    layers = [Layer(f"view {name}", rules) for name, rules in views.matching(claims)]
    explained, unavailable = await cat.explanations(layers)
    assert unavailable == []
    assert {e.public for e in explained if e.visible} == listed


@pytest.mark.anyio
async def test_what_decided_is_named() -> None:
    cat = catalog()
    by_name = {(e.upstream, e.public): e for e in (await cat.explanations([]))[0]}
    hidden = by_name["eng", "internal_dump"]
    assert hidden.decided_by == "the policy of upstream eng: deny 'internal_*' (the name)"
    renamed = by_name["docs", "docs__handbook"]
    assert renamed.renamed
    assert renamed.overridden == ("description", "name")
    assert not renamed.visible  # the global deny judges the name before the rename too
    assert (
        renamed.decided_by == "the global [policy]: deny 'docs__old_*' (its name before the rename, 'docs__old_name')"
    )
    assert by_name["eng", "shared"].visible
    collided = by_name["other", "shared"]
    assert not collided.visible
    assert collided.shown_instead == "eng"
    assert collided.as_json()["shownInstead"] == "eng"
    only, _ = await cat.explanations([], "shared")
    assert [e.upstream for e in only] == ["eng", "other"]


@pytest.mark.anyio
async def test_a_name_with_control_characters_is_refused_unless_an_override_renames_it() -> None:
    hostile = "pwn\x1b]0;owned\x07\x1b[2J"
    source = FakePromptSource("up", [{"name": hostile}, {"name": "bidi\u202eevil"}, {"name": "fine"}])
    rescued = {"bidi\u202eevil": PromptOverride(name="up__bidi")}
    cat = Catalog([Mount(source, prefix="up__", overrides=rescued)], codec=CursorCodec(b"k" * 32), generation="g")
    listed = {p["name"] for p in (await cat.all_prompts())["prompts"]}
    assert listed == {"up__bidi", "up__fine"}
    with pytest.raises(GatewayError):
        await cat.get_prompt({"name": "up__" + hostile, "arguments": {}})
    assert ("prompts/get", {"name": hostile, "arguments": {}}) not in source.calls
    (refused,), _ = await cat.explanations([], "up__" + hostile)
    assert not refused.visible
    assert refused.decided_by == "the gateway's naming rule: no control characters in a prompt name (the name)"
    assert "\x1b" not in "\n".join(refused.described())
    assert cat.refused_names() == [("up", "up__" + hostile)]
