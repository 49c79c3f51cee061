"""Overrides and tags in the catalog, with in-memory upstreams (the end-to-end tests are in
tests/integration/test_overrides_e2e.py)."""

import contextlib
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.mounts import Mount
from gateway.catalog.policy import AllOf, Rules
from gateway.config import PromptOverride
from gateway.protocol.errors import InvalidParams, UnknownPrompt, UpstreamUnavailable
from gateway.protocol.meta_keys import TAGS_META_KEY
from gateway.testing import FakePromptSource

pytestmark = pytest.mark.anyio
SEP = "__"


class OwnTagsSource(FakePromptSource):
    own_tags = True


def override(**fields: Any) -> PromptOverride:
    return PromptOverride.model_validate(fields)


def catalog(
    *mounts: tuple[FakePromptSource, dict[str, PromptOverride]],
    policy: Rules | None = None,
    rules: dict[str, Rules] | None = None,
    unprefixed: frozenset[str] = frozenset(),
) -> Catalog:
    return Catalog(
        [
            Mount(
                source,
                prefix="" if source.namespace in unprefixed else source.namespace + SEP,
                rules=(rules or {}).get(source.namespace, Rules()),
                overrides=shapes,
            )
            for source, shapes in mounts
        ],
        codec=CursorCodec(b"s" * 32),
        generation="g",
        policy=policy or Rules(separator=SEP),
    )


def git() -> FakePromptSource:
    return FakePromptSource(
        "git",
        [
            {
                "name": "commit",
                "description": "Write a commit message.",
                "arguments": [
                    {"name": "diff", "required": True},
                    {"name": "style", "required": True, "description": "upstream's"},
                    {"name": "team", "required": True},
                ],
            },
            {"name": "review", "description": "Review a change."},
            {"name": "secret-ops"},
        ],
    )


COMMIT = override(
    name="write-commit",
    title="Commit message",
    description_append="Use for every commit in this repository.",
    arguments={"style": {"description": "Conventional or plain", "default": "conventional"}},
    fixed={"team": "platform"},
    icons=[{"src": "https://example.com/c.png", "mime_type": "image/png", "sizes": ["48x48"]}],
    tags=["git", "writing"],
)


async def names(cat: Catalog, viewer: Any = None) -> list[str]:
    return [p["name"] for p in (await cat.all_prompts(viewer=viewer))["prompts"]]


async def test_a_renamed_prompt_lists_as_the_override_shapes_it() -> None:
    cat = catalog((git(), {"commit": COMMIT}))
    listing = (await cat.list_prompts(None))["prompts"]
    assert [p["name"] for p in listing] == ["write-commit", "git__review", "git__secret-ops"]
    shown = listing[0]
    assert shown["title"] == "Commit message"
    assert shown["description"] == "Write a commit message.\n\nUse for every commit in this repository."
    assert shown["icons"] == [{"src": "https://example.com/c.png", "mimeType": "image/png", "sizes": ["48x48"]}]
    assert shown["_meta"] == {TAGS_META_KEY: ["git", "writing"]}
    assert shown["arguments"] == [
        {"name": "diff", "required": True},
        {"name": "style", "required": False, "description": "Conventional or plain"},
    ]  # team is fixed: not listed


async def test_a_replaced_description_and_the_get_result_agree() -> None:
    source = git()
    cat = catalog((source, {"review": override(description="Ask for a careful review.")}))
    listing = (await cat.list_prompts(None))["prompts"]
    assert listing[1]["description"] == "Ask for a careful review."
    source.replies["prompts/get"] = {"description": "old", "messages": []}
    result = await cat.get_prompt({"name": "git__review"})
    assert result["description"] == "Ask for a careful review."


async def test_a_get_is_routed_by_the_new_name_with_defaults_and_fixed_arguments_filled_in() -> None:
    source = git()
    cat = catalog((source, {"commit": COMMIT}))
    result = await cat.get_prompt({"name": "write-commit", "arguments": {"diff": "d"}})
    assert source.calls[-1] == (
        "prompts/get",
        {"name": "commit", "arguments": {"style": "conventional", "diff": "d", "team": "platform"}},
    )
    assert "platform" in result["messages"][0]["content"]["text"]
    await cat.get_prompt({"name": "write-commit", "arguments": {"diff": "d", "style": "plain"}})
    assert source.calls[-1][1]["arguments"]["style"] == "plain"  # type: ignore[index] # the client's value wins


async def test_a_client_value_for_a_fixed_argument_is_refused() -> None:
    source = git()
    cat = catalog((source, {"commit": COMMIT}))
    with pytest.raises(InvalidParams, match="team of prompt write-commit is set by the gateway") as caught:
        await cat.get_prompt({"name": "write-commit", "arguments": {"diff": "d", "team": "mine"}})
    assert caught.value.code == -32602
    assert source.count("prompts/get") == 0
    with pytest.raises(InvalidParams, match="set by the gateway"):
        await cat.complete(
            {"ref": {"type": "ref/prompt", "name": "write-commit"}, "argument": {"name": "team", "value": ""}}
        )
    with pytest.raises(InvalidParams, match="set by the gateway"):
        await cat.complete(
            {
                "ref": {"type": "ref/prompt", "name": "write-commit"},
                "argument": {"name": "diff", "value": ""},
                "context": {"arguments": {"team": "x"}},
            }
        )


async def test_a_completion_carries_the_fixed_values_in_its_context() -> None:
    source = git()
    cat = catalog((source, {"commit": COMMIT}))
    await cat.complete(
        {
            "ref": {"type": "ref/prompt", "name": "write-commit"},
            "argument": {"name": "style", "value": "c"},
            "context": {"arguments": {"diff": "d"}},
        }
    )
    sent = source.calls[-1][1]
    assert sent is not None
    assert sent["ref"]["name"] == "commit"
    assert sent["context"]["arguments"] == {"diff": "d", "team": "platform"}


async def test_the_old_name_of_a_renamed_prompt_is_unknown() -> None:
    cat = catalog((git(), {"commit": COMMIT}))
    with pytest.raises(UnknownPrompt):
        await cat.get_prompt({"name": "git__commit", "arguments": {"diff": "d"}})


async def test_a_rename_never_shows_what_a_deny_rule_hid() -> None:
    policy = Rules(deny=("git__secret*",), separator=SEP)
    cat = catalog((git(), {"secret-ops": override(name="harmless")}), policy=policy)
    assert "harmless" not in await names(cat)
    with pytest.raises(UnknownPrompt):
        await cat.get_prompt({"name": "harmless"})
    viewer = Rules(deny=("git__secret-ops",), separator=SEP)
    cat = catalog((git(), {"secret-ops": override(name="harmless")}))
    assert "harmless" not in await names(cat, viewer)
    assert "harmless" in await names(cat)


async def test_policy_allows_by_the_public_name() -> None:
    policy = Rules(allow=("write-*",), separator=SEP)
    cat = catalog((git(), {"commit": COMMIT}), policy=policy)
    assert await names(cat) == ["write-commit"]


async def test_a_renamed_prompt_wins_over_a_later_upstream_and_loses_to_an_earlier_one() -> None:
    docs = FakePromptSource("docs", [{"name": "guide"}])
    cat = catalog((git(), {"commit": override(name="docs__guide")}), (docs, {}))
    assert (await names(cat)).count("docs__guide") == 1
    await cat.get_prompt({"name": "docs__guide", "arguments": {"diff": "d", "style": "s", "team": "t"}})
    assert docs.count("prompts/get") == 0
    assert [(c.name, c.winner, c.loser) for c in await cat.collisions()] == [("docs__guide", "git", "docs")]

    docs = FakePromptSource("docs", [{"name": "guide"}])
    cat = catalog((docs, {}), (git(), {"commit": override(name="docs__guide")}))
    assert (await names(cat)).count("docs__guide") == 1
    await cat.get_prompt({"name": "docs__guide"})
    assert docs.count("prompts/get") == 1
    assert [(c.winner, c.loser) for c in await cat.collisions()] == [("docs", "git")]


async def test_a_rename_onto_a_sibling_hides_the_sibling() -> None:
    source = git()
    cat = catalog((source, {"commit": override(name="git__review")}))
    listed = await names(cat)
    assert listed.count("git__review") == 1
    await cat.get_prompt({"name": "git__review", "arguments": {"diff": "d", "style": "s", "team": "t"}})
    assert source.calls[-1][1]["name"] == "commit"  # type: ignore[index]


async def test_an_upstream_cannot_tag_its_own_prompts() -> None:
    upstream = FakePromptSource("remote", [{"name": "p", "_meta": {TAGS_META_KEY: ["public"], "other": 1}}])
    policy = Rules(allow_tags=("public",), separator=SEP)
    assert await names(catalog((upstream, {}), policy=policy)) == []
    listing = (await catalog((upstream, {})).list_prompts(None))["prompts"]
    assert listing == [{"name": "remote__p", "_meta": {"other": 1}}]


async def test_tags_from_files_and_overrides_decide_visibility_deny_wins() -> None:
    files = OwnTagsSource(
        "files",
        [
            {"name": "a", "_meta": {TAGS_META_KEY: ["public"]}},
            {"name": "b", "_meta": {TAGS_META_KEY: ["public", "draft"]}},
            {"name": "c"},
        ],
    )
    shapes = {"c": override(tags=["public"])}
    assert await names(catalog((files, shapes), policy=Rules(allow_tags=("public",), deny_tags=("draft",)))) == [
        "files__a",
        "files__c",
    ]
    # a deny tag matches look-alikes too, as deny names do
    files.prompts.append({"name": "d", "_meta": {TAGS_META_KEY: ["DRAFT"]}})
    files.prompts.append({"name": "e", "_meta": {TAGS_META_KEY: ["drаft"]}})  # Cyrillic a
    assert await names(catalog((files, shapes), policy=Rules(deny_tags=("draft",)))) == ["files__a", "files__c"]
    # the upstream's own policy and a viewer may go by tags too
    upstream_rules = {"files": Rules(deny_tags=("public",))}
    assert await names(catalog((files, shapes), rules=upstream_rules)) == ["files__d", "files__e"]
    viewer = AllOf((Rules(allow_tags=("draft",)),), key="v")  # allow is exact: DRAFT is another tag
    assert await names(catalog((files, shapes)), viewer) == ["files__b"]
    with pytest.raises(UnknownPrompt):
        await catalog((files, shapes)).get_prompt({"name": "files__a"}, viewer=viewer)


async def test_a_listing_key_changes_with_tag_rules() -> None:
    assert Rules().key != Rules(deny_tags=("x",)).key
    assert Rules().key == Rules(allow=("*",)).key


_LOCALS = st.sets(st.sampled_from(["a", "b", "c", "d"]), min_size=1)
_TARGETS = st.sampled_from(["one__a", "one__b", "two__a", "two__c", "x", "y"])


@settings(max_examples=100, deadline=None)
@given(_LOCALS, st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), _TARGETS, max_size=4), _LOCALS)
def test_any_renames_list_each_public_name_once_route_it_and_never_reach_a_denied_prompt(
    locals_: set[str], renames: dict[str, str], denied: set[str]
) -> None:
    """Whatever the renames (onto siblings, onto another upstream's names, onto each other's old names):
    every public name lists once, every listed name gets, and no get reaches a prompt a deny rule hid."""
    if len(set(renames.values())) != len(renames):
        return  # the config refuses two renames to one name
    shapes = {local: override(name=new) for local, new in renames.items()}
    one = FakePromptSource("one", [{"name": n} for n in sorted(locals_)])
    two = FakePromptSource("two", [{"name": n} for n in sorted(locals_)])
    policy = Rules(deny=tuple(f"one__{d}" for d in denied), separator=SEP)

    async def run() -> None:
        cat = catalog((one, shapes), (two, {}), policy=policy)
        listed = await names(cat)
        assert len(listed) == len(set(listed))
        for name in listed:
            await cat.get_prompt({"name": name})
        for name in [*listed, *(f"one__{d}" for d in denied), *renames.values()]:
            with contextlib.suppress(UnknownPrompt):
                await cat.get_prompt({"name": name})
        reached = {params["name"] for method, params in one.calls if method == "prompts/get" and params}
        assert not reached & denied

    anyio.run(run)


async def test_tag_rules_of_tokens_and_views_come_from_the_config() -> None:
    from gateway.app import Gateway
    from gateway.config import parse_config
    from gateway.identity.views import ClaimViews

    config = parse_config(
        {
            "server": {
                "tokens": [{"name": "ci", "token": "t" * 16, "policy": {"deny_tags": ["draft"]}}],
                "auth": {"resource": "https://gw.example/mcp", "issuers": [{"issuer": "https://id.example"}]},
                "views": [
                    {
                        "name": "support",
                        "match": {"claim": "groups", "any_of": ["support"]},
                        "policy": {"allow_tags": ["public"]},
                    }
                ],
            }
        }
    )
    files = OwnTagsSource(
        "files",
        [{"name": "a", "_meta": {TAGS_META_KEY: ["public"]}}, {"name": "b", "_meta": {TAGS_META_KEY: ["draft"]}}],
    )
    cat = catalog((files, {}))
    token_viewer = Gateway._token_rules(config)["ci"]
    assert await names(cat, token_viewer) == ["files__a"]
    view = ClaimViews(config.server.views, "__").viewer_for({"groups": ["support"]})
    assert await names(cat, view) == ["files__a"]
    files.prompts.append({"name": "c"})
    assert await names(catalog((files, {})), view) == ["files__a"]  # no tag: not allowed by allow_tags


async def test_an_unprefixed_upstream_with_a_rename_that_is_down_does_not_hide_other_names() -> None:
    down = FakePromptSource("down", [{"name": "x"}], ready=False)
    later = FakePromptSource("later", [{"name": "y"}])
    cat = catalog((down, {"x": override(name="nice-x")}), (later, {}), unprefixed=frozenset({"down", "later"}))
    assert (await cat.get_prompt({"name": "y"}))["messages"]  # was "Upstream 'down' is not connected"
    with pytest.raises(UpstreamUnavailable):
        await cat.get_prompt({"name": "nice-x"})  # the renamed name is down's alone


async def test_overrides_naming_nothing_the_upstream_lists_are_said() -> None:
    """A tester's three typos (a prompt, a fixed argument, a described one) were taken without a word: the
    misspelt fixed argument was sent upstream, and a strict server then refused every get."""
    shapes = {
        "comit": override(description="typo'd prompt"),
        "commit": override(fixed={"teem": "platform"}, arguments={"bogus": {"default": "y"}, "style": {}}),
        "review": override(name="code-review"),
    }
    notes = await catalog((git(), shapes)).override_notes()
    assert notes == [
        ("git", "the override of 'comit' names no prompt this upstream lists (did you mean 'commit'?)"),
        ("git", "the override of 'commit': fixed argument 'teem' is none the prompt declares (did you mean 'team'?)"),
        ("git", "the override of 'commit': argument 'bogus' is none the prompt declares"),
    ]
