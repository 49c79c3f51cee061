"""Views from token claims: whatever shape a claim has, matching never fails, and only exact strings
count (a look-alike group name is another group)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.catalog.policy import AllOf, Rules
from gateway.config import ClaimMatch, PolicyRules, ViewSettings
from gateway.identity.views import MAX_VALUES, ClaimViews, claim_values, matches

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)
claims_strategy = st.dictionaries(
    st.sampled_from(["groups", "roles", "scope", "scp", "email", "org", "x"]), json_values
)

ENG = ViewSettings(
    name="eng", match=ClaimMatch(claim="groups", any_of=("eng",)), policy=PolicyRules(allow=("*",), deny=())
)
OUTSIDERS = ViewSettings(
    name="outsiders",
    match=ClaimMatch(claim="groups", none_of=("eng",)),
    policy=PolicyRules(allow=("*",), deny=("eng__*",)),
)


@given(claims_strategy)
def test_any_claim_shape_is_matched_without_failing(claims: dict[str, Any]) -> None:
    views = ClaimViews([ENG, OUTSIDERS], "__")
    viewer = views.viewer_for(claims)
    assert viewer is not None  # exactly one of the two always matches
    in_eng = "eng" in (claim_values(claims, "groups") or [])
    assert viewer.allows("eng__code_review") is in_eng
    assert viewer.allows("writing__summarize")


@given(st.lists(st.text(), max_size=2 * MAX_VALUES))
def test_only_strings_of_bounded_arrays_are_read(values: list[str]) -> None:
    assert claim_values({"groups": values}, "groups") == values[:MAX_VALUES]


def test_look_alike_group_names_are_other_groups() -> None:
    for spoof in ("еng", "ENG", "eng ", "e\u200bng", "ｅｎｇ"):  # Cyrillic e, case, space, zero-width, full-width
        claims = {"groups": [spoof]}
        assert not matches(ENG.match, claims)
        assert matches(OUTSIDERS.match, claims)  # so the outsiders' deny applies to them


def test_claim_paths_scopes_and_domains() -> None:
    claims = {"realm_access": {"roles": ["admin"]}, "scp": "prompts:read prompts:admin", "email": "ada@example.com"}
    assert claim_values(claims, "realm_access.roles") == ["admin"]
    assert claim_values(claims, "scp") == ["prompts:read", "prompts:admin"]
    assert claim_values({"https://example.com/groups": ["a"]}, "https://example.com/groups") == ["a"]
    assert matches(ClaimMatch(claim="email", ends_with="@example.com"), claims)
    assert not matches(ClaimMatch(claim="email", ends_with="@example.org"), claims)
    assert not matches(ClaimMatch(claim="missing", any_of=("x",)), claims)
    assert matches(ClaimMatch(claim="missing", none_of=("x",)), claims)


def test_every_matching_view_narrows_and_deny_wins() -> None:
    docs_only = ViewSettings(
        name="docs", match=ClaimMatch(claim="groups", any_of=("docs",)), policy=PolicyRules(allow=("docs__*",))
    )
    views = ClaimViews([OUTSIDERS, docs_only], "__")
    viewer = views.viewer_for({"groups": ["docs"]})
    assert isinstance(viewer, AllOf)
    assert viewer.allows("docs__guide")
    assert not viewer.allows("writing__summarize")  # outside the docs view's allow
    assert not viewer.allows("eng__code_review")
    assert views.viewer_for({"groups": ["eng"]}) is None  # nothing narrows the global policy
    assert isinstance(views.viewer_for({"groups": []}), Rules)
    assert views.viewer_for({"groups": ["docs"]}).key != views.viewer_for({"groups": []}).key  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_person_matching_no_view_gets_a_private_listing() -> None:
    """An operator's tester: "eng" (matching no view) got ``cacheScope: public`` on a listing holding
    names a "sales" person may not see; a shared cache honouring it could hand it on. Private, as for a
    token without a policy of its own."""
    from gateway.app import run_gateway
    from gateway.config import parse_config
    from gateway.identity.principal import Identity

    config = parse_config(
        {
            "server": {
                "transport": "http",
                "auth": {"resource": "http://127.0.0.1:9/mcp", "issuers": [{"issuer": "https://issuer.example"}]},
                "views": [{"name": "outsiders", "match": {"claim": "groups", "none_of": ["eng"]}, "policy": {}}],
            },
        }
    )
    async with run_gateway(config) as gateway:
        engineer = Identity.access_token("https://issuer.example", "eng", {"groups": ["eng"]})
        viewer = gateway.viewer_for(engineer)
        assert viewer is not None
        listing = await gateway.catalog.list_prompts(None, viewer=viewer)
        assert listing["cacheScope"] == "private"
        assert (await gateway.catalog.skills.list_skills({}, viewer=viewer))["cacheScope"] == "private"
