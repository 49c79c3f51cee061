from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.catalog.catalog import Catalog
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.mounts import Mount
from gateway.catalog.policy import Rules
from gateway.config import PromptOverride
from gateway.protocol.errors import (
    GatewayError,
    InvalidCursor,
    InvalidParams,
    UnknownPrompt,
    UpstreamProtocolError,
    UpstreamUnavailable,
    UpstreamUnsupported,
)
from gateway.protocol.meta_keys import UNAVAILABLE_META_KEY
from gateway.testing import FakePromptSource

pytestmark = pytest.mark.anyio
SEP = "__"


def catalog(
    *sources: FakePromptSource,
    prefix: dict[str, bool] | None = None,
    rules: dict[str, Rules] | None = None,
    policy: Rules | None = None,
    page_size: int | None = None,
    secret: bytes = b"s" * 32,
    on_upstream_error: str = "skip",
    clock: Any = None,
) -> Catalog:
    mounts = [
        Mount(
            s,
            prefix=s.namespace + SEP if (prefix or {}).get(s.namespace, True) else "",
            rules=(rules or {}).get(s.namespace, Rules()),
        )
        for s in sources
    ]
    return Catalog(
        mounts,
        codec=CursorCodec(secret),
        generation="g",
        policy=policy or Rules(separator=SEP),
        page_size=page_size,
        on_upstream_error=on_upstream_error,
        **({"clock": clock} if clock is not None else {}),
    )  # type: ignore[arg-type]


async def list_all(cat: Catalog, viewer: Rules | None = None) -> list[list[dict[str, Any]]]:
    pages, params = [], None
    while True:
        page = await cat.list_prompts(params, viewer=viewer)
        pages.append(page["prompts"])
        if "nextCursor" not in page:
            return pages
        params = {"cursor": page["nextCursor"]}


async def test_thousand_prompts_in_pages_of_seven_list_exactly_once_with_page_size() -> None:
    big = FakePromptSource.numbered("big", 1000, page_size=7)
    small = FakePromptSource.numbered("small", 33, page_size=10)
    pages = await list_all(catalog(big, small, page_size=50))
    names = [p["name"] for page in pages for p in page]
    expected = [f"big__p{i:05d}" for i in range(1000)] + [f"small__p{i:05d}" for i in range(33)]
    assert sorted(names) == sorted(expected)
    assert len(names) == len(set(names))
    assert all(len(page) <= 50 for page in pages)
    assert all(pages[:-1])  # no empty page before the last


async def test_without_page_size_a_page_is_one_page_of_each_upstream_in_config_order() -> None:
    a = FakePromptSource.numbered("a", 25, page_size=10)
    b = FakePromptSource.numbered("b", 5, page_size=10)
    pages = await list_all(catalog(a, b))
    assert [len(p) for p in pages] == [15, 10, 5]
    assert pages[0][0]["name"] == "a__p00000"
    assert pages[0][10]["name"] == "b__p00000"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 9)), min_size=1, max_size=4),
    st.none() | st.integers(1, 20),
    st.sets(st.integers(0, 59), max_size=20),
)
def test_any_layout_lists_every_visible_prompt_exactly_once(
    layout: list[tuple[int, int]], page_size: int | None, hidden: set[int]
) -> None:
    sources = [FakePromptSource.numbered(f"u{i}", n, page_size=size) for i, (n, size) in enumerate(layout)]
    policy = Rules(deny=tuple(f"*__p{h:05d}" for h in hidden), separator=SEP)

    async def run() -> None:
        pages = await list_all(catalog(*sources, page_size=page_size, policy=policy))
        names = [p["name"] for page in pages for p in page]
        expected = [f"u{i}__p{k:05d}" for i, (n, _) in enumerate(layout) for k in range(n) if k not in hidden]
        assert sorted(names) == sorted(expected)
        assert len(names) == len(set(names))
        if page_size is not None:
            assert all(len(page) <= page_size for page in pages)

    anyio.run(run)


async def test_every_field_but_the_name_passes_through_untouched() -> None:
    prompt = {
        "name": "x",
        "title": "T",
        "icons": [{"src": "i.png"}],
        "_meta": {"k": 1},
        "future": {"a": [1]},
        "arguments": [{"name": "q", "required": True, "extra": 1}],
    }
    listing = await catalog(FakePromptSource("ns", [prompt])).list_prompts(None)
    assert listing["prompts"] == [{**prompt, "name": "ns__x"}]
    assert prompt["name"] == "x"  # the upstream's own object is not mutated


@pytest.mark.parametrize("cursor", ["garbage", "", 5, None.__class__.__name__, "eyJnIjoiZyJ9"])
async def test_bad_cursors_are_invalid_params(cursor: object) -> None:
    with pytest.raises(InvalidCursor):
        await catalog(FakePromptSource.numbered("a", 30)).list_prompts({"cursor": cursor})


async def test_cursor_from_another_secret_is_rejected() -> None:
    first = await catalog(FakePromptSource.numbered("a", 30)).list_prompts(None)
    with pytest.raises(InvalidCursor):
        await catalog(FakePromptSource.numbered("a", 30), secret=b"t" * 32).list_prompts(
            {"cursor": first["nextCursor"]}
        )


async def test_a_replica_with_the_same_secret_continues_the_listing() -> None:
    first = await catalog(FakePromptSource.numbered("a", 30)).list_prompts(None)
    second = await catalog(FakePromptSource.numbered("a", 30)).list_prompts({"cursor": first["nextCursor"]})
    assert second["prompts"][0]["name"] == "a__p00010"


async def test_get_routes_by_exact_name_and_strips_the_namespace() -> None:
    a, b = FakePromptSource.numbered("a", 3), FakePromptSource.numbered("b", 3)
    result = await catalog(a, b).get_prompt({"name": "b__p00001", "arguments": {"k": "v"}, "_meta": {"x": 1}})
    assert result["messages"][0]["content"]["text"] == "b:p00001:[('k', 'v')]"
    assert b.calls[-1] == ("prompts/get", {"name": "p00001", "arguments": {"k": "v"}, "_meta": {"x": 1}})
    assert a.count("prompts/get") == 0


@pytest.mark.parametrize("name", ["a__nope", "nope", "c__p00001", "a__P00001", "a____p00001", "a__p00001 ", ""])
async def test_unknown_names_are_never_forwarded(name: str) -> None:
    a = FakePromptSource.numbered("a", 3, announces_list_changes=False)
    with pytest.raises(UnknownPrompt, match=f"Unknown prompt: {name}$"):
        await catalog(a).get_prompt({"name": name})
    assert a.count("prompts/get") == 0


async def test_policy_hides_prompts_exactly_like_unknown_ones() -> None:
    a = FakePromptSource("a", [{"name": "secret_plan"}, {"name": "public"}, {"name": "internal_x"}])
    cat = catalog(a, policy=Rules(deny=("a__secret_*",), separator=SEP), rules={"a": Rules(deny=("internal_*",))})
    listed = [p["name"] for p in (await cat.list_prompts(None))["prompts"]]
    assert listed == ["a__public"]
    errors = []
    for name in ("a__secret_plan", "a__internal_x", "a__does_not_exist"):
        with pytest.raises(UnknownPrompt) as info:
            await cat.get_prompt({"name": name})
        errors.append((info.value.code, info.value.message.replace(name, "NAME")))
        with pytest.raises(UnknownPrompt):
            await cat.complete({"ref": {"type": "ref/prompt", "name": name}, "argument": {"name": "x", "value": ""}})
    assert len(set(errors)) == 1
    assert a.count("prompts/get") == 0
    assert a.count("completion/complete") == 0


async def test_a_viewer_sees_only_what_its_rules_allow() -> None:
    cat = catalog(FakePromptSource.numbered("a", 3), FakePromptSource.numbered("b", 3))
    viewer = Rules(allow=("b__*",))
    assert {p["name"][:3] for page in await list_all(cat, viewer) for p in page} == {"b__"}
    with pytest.raises(UnknownPrompt):
        await cat.get_prompt({"name": "a__p00000"}, viewer=viewer)


async def test_arguments_are_checked_before_forwarding() -> None:
    a = FakePromptSource(
        "a",
        [
            {
                "name": "w",
                "arguments": [{"name": "city", "required": True}, {"name": "day", "required": True}, {"name": "units"}],
            }
        ],
    )
    cat = catalog(a)
    with pytest.raises(InvalidParams, match="Missing required arguments for prompt a__w: city, day"):
        await cat.get_prompt({"name": "a__w", "arguments": {"units": "C"}})
    with pytest.raises(InvalidParams, match=r"arguments\.city: Input should be a valid string"):
        await cat.get_prompt({"name": "a__w", "arguments": {"city": 1, "day": "x"}})
    with pytest.raises(InvalidParams, match="name: Input should be a valid string"):
        await cat.get_prompt({"name": 5})
    assert a.count("prompts/get") == 0
    await cat.get_prompt({"name": "a__w", "arguments": {"city": "Oslo", "day": "mon"}})
    assert a.count("prompts/get") == 1


async def test_what_a_prompt_takes_follows_its_listing() -> None:
    """Worked out once per listing entry: a listing that adds an argument (announced, so pages are
    cached until then) is what the next get is checked against."""
    a = FakePromptSource("a", [{"name": "w", "arguments": [{"name": "city"}]}])
    cat = catalog(a)
    await cat.get_prompt({"name": "a__w", "arguments": {"city": "Lyon"}})
    with pytest.raises(InvalidParams, match=r"unknown argument 'day' for prompt a__w \(it takes: city\)"):
        await cat.get_prompt({"name": "a__w", "arguments": {"city": "Lyon", "day": "monday"}})
    a.prompts = [{"name": "w", "arguments": [{"name": "city"}, {"name": "day"}]}]
    cat.invalidate("a")
    await cat.get_prompt({"name": "a__w", "arguments": {"city": "Lyon", "day": "monday"}})
    assert a.count("prompts/get") == 2


async def test_unprefixed_mounts_keep_names_and_the_first_upstream_wins_collisions() -> None:
    first = FakePromptSource("first", [{"name": "shared"}, {"name": "only_first"}])
    second = FakePromptSource("second", [{"name": "shared"}, {"name": "only_second"}])
    cat = catalog(first, second, prefix={"first": False, "second": False})
    names = [p["name"] for page in await list_all(cat) for p in page]
    assert names == ["shared", "only_first", "only_second"]
    result = await cat.get_prompt({"name": "shared"})
    assert result["messages"][0]["content"]["text"].startswith("first:")
    assert [(c.name, c.winner, c.loser) for c in await cat.collisions()] == [("shared", "first", "second")]


async def test_unprefixed_collision_with_a_prefixed_name() -> None:
    docs = FakePromptSource("docs", [{"name": "guide"}])
    raw = FakePromptSource("raw", [{"name": "docs__guide"}, {"name": "other"}])
    cat = catalog(docs, raw, prefix={"raw": False})
    assert [p["name"] for page in await list_all(cat) for p in page] == ["docs__guide", "other"]
    assert (await cat.get_prompt({"name": "docs__guide"}))["messages"][0]["content"]["text"].startswith("docs:")


async def test_listing_is_cached_until_the_upstream_announces_a_change() -> None:
    a = FakePromptSource.numbered("a", 50, page_size=10)
    cat = catalog(a)
    await list_all(cat)
    calls = a.count("prompts/list")
    await list_all(cat)
    await cat.get_prompt({"name": "a__p00042"})
    assert a.count("prompts/list") == calls
    a.prompts.append({"name": "new"})
    cat.invalidate("a")
    names = [p["name"] for page in await list_all(cat) for p in page]
    assert "a__new" in names
    assert a.count("prompts/list") > calls


async def test_upstreams_that_never_announce_changes_are_not_cached_but_misses_refresh() -> None:
    a = FakePromptSource.numbered("a", 5, announces_list_changes=False)
    cat = catalog(a)
    await cat.list_prompts(None)
    await cat.list_prompts(None)
    assert a.count("prompts/list") == 2
    a.prompts.append({"name": "late"})
    cat._states[0].index_built_at -= 10  # the miss-refresh rate limit has elapsed
    await cat.get_prompt({"name": "a__late"})


async def test_a_failing_upstream_is_left_out_and_named_in_meta() -> None:
    good, down = FakePromptSource.numbered("good", 3), FakePromptSource.numbered("down", 3, ready=False)
    listing = await catalog(down, good).list_prompts(None)
    assert [p["name"] for p in listing["prompts"]] == ["good__p00000", "good__p00001", "good__p00002"]
    assert listing["_meta"] == {UNAVAILABLE_META_KEY: ["down"]}
    assert "nextCursor" not in listing
    with pytest.raises(UpstreamUnavailable, match="Upstream 'down'"):
        await catalog(down, good, on_upstream_error="fail").list_prompts(None)
    with pytest.raises(UpstreamUnavailable, match="Upstream 'down' is not connected"):
        await catalog(down, good).get_prompt({"name": "down__p00000"})


async def test_completion_routes_strips_and_degrades() -> None:
    a = FakePromptSource.numbered("a", 2)
    no = FakePromptSource.numbered("no", 2, completes=False)
    cat = catalog(a, no)
    params = {
        "ref": {"type": "ref/prompt", "name": "a__p00001"},
        "argument": {"name": "x", "value": "v"},
        "context": {"arguments": {"y": "z"}},
    }
    assert (await cat.complete(params))["completion"]["values"] == ["p00001:v"]
    assert a.calls[-1][1] == {**params, "ref": {"type": "ref/prompt", "name": "p00001"}}
    empty = await cat.complete({**params, "ref": {"type": "ref/prompt", "name": "no__p00000"}})
    assert empty["completion"]["values"] == []
    with pytest.raises(InvalidParams, match="ref/prompt only"):
        await cat.complete(
            {"ref": {"type": "ref/resource", "uri": "file:///x"}, "argument": {"name": "a", "value": ""}}
        )


async def test_invalid_upstream_results_are_contained() -> None:
    class BrokenList(FakePromptSource):
        async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            return {"prompts": [{"name": 5}]}

    class BrokenGet(FakePromptSource):
        async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            if method == "prompts/list":
                return {"prompts": [{"name": "x"}]}
            return {"messages": [{"role": "robot", "content": {"type": "image", "data": "!", "mimeType": "a/b"}}]}

    listing = await catalog(BrokenList("b"), FakePromptSource.numbered("ok", 1)).list_prompts(None)
    assert listing["_meta"] == {UNAVAILABLE_META_KEY: ["b"]}
    assert len(listing["prompts"]) == 1
    with pytest.raises(
        UpstreamProtocolError, match=r"Upstream .b. sent an invalid prompts/list result: prompts\.0\.name"
    ):
        await catalog(BrokenList("b"), on_upstream_error="fail").list_prompts(None)
    with pytest.raises(UpstreamProtocolError, match=r"invalid prompts/get result: messages.0.role") as info:
        await catalog(BrokenGet("g")).get_prompt({"name": "g__x"})
    assert info.value.code == -32603
    assert "messages.0.content.data: Value error, not valid base64" in info.value.message


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_merged_page_is_as_fresh_as_its_least_fresh_part() -> None:
    clock = Clock()
    hinted = FakePromptSource.numbered("m", 2, list_ttl_ms=5_000, announces_list_changes=False)
    announcing = FakePromptSource.numbered("a", 2)
    page = await catalog(hinted, announcing, clock=clock).list_prompts(None)
    assert (page["ttlMs"], page["cacheScope"]) == (5_000, "public")
    assert (await catalog(announcing, clock=clock).list_prompts(None))["ttlMs"] == 60_000  # the configured default
    silent = FakePromptSource.numbered("s", 2, announces_list_changes=False)
    assert (await catalog(announcing, silent).list_prompts(None))["ttlMs"] == 0  # its changes go unannounced
    private = FakePromptSource.numbered("p", 2, list_ttl_ms=9_000, list_private=True)
    assert (await catalog(announcing, private).list_prompts(None))["cacheScope"] == "private"
    assert (await catalog(announcing).list_prompts(None, viewer=Rules(separator=SEP)))["cacheScope"] == "private"
    down = FakePromptSource.numbered("d", 2, ready=False)
    assert (await catalog(announcing, down).list_prompts(None))["ttlMs"] == 0  # ask again: it may be back


async def test_pages_with_a_ttl_are_cached_until_it_runs_out() -> None:
    clock = Clock()
    hinted = FakePromptSource.numbered("m", 2, list_ttl_ms=5_000, announces_list_changes=False)
    cat = catalog(hinted, clock=clock)
    await cat.list_prompts(None)
    clock.now += 4.0
    again = await cat.list_prompts(None)
    assert hinted.count("prompts/list") == 1
    assert again["ttlMs"] == 1_000  # what is left of the page's freshness
    clock.now += 1.0
    await cat.list_prompts(None)
    assert hinted.count("prompts/list") == 2
    zero = FakePromptSource.numbered("z", 2, list_ttl_ms=0, announces_list_changes=False)
    cat = catalog(zero, clock=clock)
    await cat.list_prompts(None)
    await cat.list_prompts(None)
    assert zero.count("prompts/list") == 2
    # An upstream that announces its changes is trusted until it does, whatever its TTL (most send 0).
    announcing = FakePromptSource.numbered("a", 2, list_ttl_ms=0)
    cat = catalog(announcing, clock=clock)
    await cat.list_prompts(None)
    again = await cat.list_prompts(None)
    assert announcing.count("prompts/list") == 1
    assert again["ttlMs"] == 60_000
    cat.invalidate("a")
    await cat.list_prompts(None)
    assert announcing.count("prompts/list") == 2


async def test_input_required_passes_through_to_modern_clients_only() -> None:
    waiting = {
        "resultType": "input_required",
        "inputRequests": {"who": {"method": "elicitation/create", "params": {"message": "name?"}}},
        "requestState": "opaque",
    }
    source = FakePromptSource.numbered("m", 1, replies={"prompts/get": waiting})
    cat = catalog(source)
    assert await cat.get_prompt({"name": "m__p00000"}, input_required=True) is waiting
    with pytest.raises(UpstreamUnsupported, match="only 2026-07-28 clients can answer") as caught:
        await cat.get_prompt({"name": "m__p00000"})
    assert caught.value.code == -32603
    source.replies["prompts/get"] = {"resultType": "input_required"}
    with pytest.raises(UpstreamProtocolError, match="needs inputRequests or requestState"):
        await cat.get_prompt({"name": "m__p00000"}, input_required=True)
    source.replies["prompts/get"] = {"resultType": "deferred", "messages": []}
    with pytest.raises(UpstreamProtocolError, match="unknown resultType 'deferred'"):
        await cat.get_prompt({"name": "m__p00000"}, input_required=True)


async def _outcome(cat: Catalog, name: str, viewer: Rules | None = None) -> tuple[int, str]:
    with pytest.raises(GatewayError) as info:
        await cat.get_prompt({"name": name}, viewer=viewer)
    return info.value.code, info.value.message.replace(name, "NAME")


@pytest.mark.parametrize("listed_before", [True, False])
async def test_hidden_and_unknown_names_answer_alike_while_their_upstream_is_down(listed_before: bool) -> None:
    docs = FakePromptSource("docs", [{"name": "secret_plan"}, {"name": "howto"}, {"name": "internal_x"}])
    cat = catalog(
        docs, policy=Rules(deny=("docs__secret_plan",), separator=SEP), rules={"docs": Rules(deny=("internal_*",))}
    )
    if listed_before:
        await cat.list_prompts(None)
    docs.ready = False
    cat.invalidate("docs")
    outcomes = {name: await _outcome(cat, name) for name in ("docs__secret_plan", "docs__internal_x", "docs__nope")}
    assert set(outcomes.values()) == {(-32603, "Upstream 'docs' is not connected")}, outcomes
    # a caller that can see nothing of the upstream learns nothing of it, not even that it is down
    blind = Rules(deny=("docs__*",))
    outcomes = {name: await _outcome(cat, name, blind) for name in ("docs__secret_plan", "docs__howto", "docs__x")}
    assert set(outcomes.values()) == {(-32602, "Unknown prompt: NAME")}, outcomes
    assert UNAVAILABLE_META_KEY not in (await cat.list_prompts(None, viewer=blind)).get("_meta", {})
    assert (await cat.list_prompts(None))["_meta"] == {UNAVAILABLE_META_KEY: ["docs"]}


async def test_the_unavailable_meta_names_only_upstreams_the_caller_can_see_something_of() -> None:
    shown = FakePromptSource("shown", [{"name": "a"}])
    only_secret = FakePromptSource("ops", [{"name": "secret"}])
    cat = catalog(shown, only_secret, policy=Rules(deny=("ops__secret",), separator=SEP))
    await cat.list_prompts(None)  # what each upstream lists is known from now on
    shown.ready = only_secret.ready = False
    cat.invalidate("shown")
    cat.invalidate("ops")
    assert (await cat.list_prompts(None))["_meta"] == {UNAVAILABLE_META_KEY: ["shown"]}
    assert await _outcome(cat, "ops__secret") == await _outcome(cat, "ops__other") == (-32602, "Unknown prompt: NAME")


@pytest.mark.parametrize(
    ("rules", "prefix", "expected"),
    [
        (Rules(), "docs__", True),
        (Rules(deny=("docs__*",)), "docs__", False),
        (Rules(deny=("d*",)), "docs__", False),
        (Rules(deny=("docs__secret_*",)), "docs__", True),
        (Rules(allow=("other__*",)), "docs__", False),
        (Rules(allow=("docs__x",)), "docs__", True),
        (Rules(allow=("do?s__*",)), "docs__", True),
        (Rules(allow=("d[aeiou]cs__*",)), "docs__", True),
        (Rules(allow=("docs",)), "docs__", False),
    ],
)
def test_may_allow_under(rules: Rules, prefix: str, expected: bool) -> None:
    assert rules.may_allow_under(prefix) is expected


async def test_a_prompt_the_global_policy_hides_does_not_hold_its_name_against_a_later_upstream() -> None:
    """Found by a trial: the first upstream's ``greet``, hidden from everyone by the global ``deny_tags``,
    still won the collision, so the second upstream's visible ``greet`` was unknown to every client."""
    first = FakePromptSource("first", [{"name": "greet"}])
    second = FakePromptSource("second", [{"name": "greet"}])
    drafts = {"greet": PromptOverride(tags=("draft",))}
    cat = Catalog(
        [Mount(first, prefix="", overrides=drafts), Mount(second, prefix="")],
        codec=CursorCodec(b"s" * 32),
        generation="g",
        policy=Rules(deny_tags=("draft",), separator=SEP),
    )
    assert [p["name"] for page in await list_all(cat) for p in page] == ["greet"]
    result = await cat.get_prompt({"name": "greet"})
    assert result["messages"][0]["content"]["text"].startswith("second:")
    assert await cat.collisions() == []


async def test_a_kept_routing_decision_holds_only_while_its_listing_and_upstream_do() -> None:
    """A name's route is decided once per caller and listing: a new listing, an upstream gone down, or
    another caller's rules decide afresh (what the kept decision skipped reading would say otherwise)."""
    docs = FakePromptSource("docs", [{"name": "howto"}, {"name": "draft"}])
    cat = catalog(docs)
    blind = Rules(deny=("docs__howto",))
    await cat.get_prompt({"name": "docs__howto"})
    await cat.get_prompt({"name": "docs__howto"})  # kept for the caller without rules
    assert await _outcome(cat, "docs__howto", blind) == (-32602, "Unknown prompt: NAME")  # not another's
    docs.ready = False  # down, the index still in place: not served from what was kept
    assert (await _outcome(cat, "docs__howto"))[0] == -32603
    docs.ready = True
    await cat.get_prompt({"name": "docs__howto"})
    docs.prompts[:] = [{"name": "draft"}]  # listed no more
    cat.invalidate("docs")
    assert await _outcome(cat, "docs__howto") == (-32602, "Unknown prompt: NAME")


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ({"text": "no type"}, "messages.0.content.type: Field required"),  # was a TypeError, not this error
        ({"type": 7}, "messages.0.content.type: Input should be a valid string"),
        ({"type": "text"}, "messages.0.content.text: Field required"),
        ({"type": "resource", "resource": {"uri": "a"}}, "messages.0.content.resource.TextResourceContents.text"),
        ("hello", "messages.0.content: Input should be a valid dictionary"),
    ],
)
async def test_an_invalid_content_block_is_the_upstreams_error_naming_the_field(content: Any, said: str) -> None:
    class Answers(FakePromptSource):
        async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            if method == "prompts/list":
                return {"prompts": [{"name": "x"}]}
            return {"messages": [{"role": "user", "content": content}]}

    with pytest.raises(UpstreamProtocolError, match="sent an invalid prompts/get result") as info:
        await catalog(Answers("g")).get_prompt({"name": "g__x"})
    assert said in info.value.message


async def test_content_of_a_future_type_is_relayed_as_it_came() -> None:
    block = {"type": "hologram", "frames": [1, 2], "_meta": {"x": 1}}

    class Answers(FakePromptSource):
        async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            if method == "prompts/list":
                return {"prompts": [{"name": "x"}]}
            return {"messages": [{"role": "assistant", "content": block}], "extra": True}

    result = await catalog(Answers("g")).get_prompt({"name": "g__x"})
    assert result["messages"][0]["content"] is block
    assert result["extra"] is True


def test_the_upstream_a_name_belongs_to_is_kept_within_a_bound() -> None:
    from gateway.catalog.routing import MAX_DECIDED

    cat = catalog(FakePromptSource.numbered("a", 1), FakePromptSource.numbered("b", 1))
    assert cat.upstream_of("b__x") == "b"
    assert cat.upstream_of("c__x") is None
    for n in range(MAX_DECIDED + 10):  # names are what clients send: as many as they like
        assert cat.upstream_of(f"a__{n}") == "a"
    assert len(cat._upstream_by_name) <= MAX_DECIDED
    assert cat.upstream_of("b__x") == "b"
