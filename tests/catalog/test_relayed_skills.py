"""A relayed upstream's skill manifests, held rather than asked for at each request (sans I/O, with a fake
upstream and a clock): until the upstream announces a change, for its ``ttlMs``, or for a short bound;
never past an invalidation that came while they were being fetched; and a file whose bytes match only
a newer manifest is not mistaken for a tampered one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from gateway.catalog.cursor import CursorCodec
from gateway.catalog.mounts import Mount
from gateway.catalog.relayed_skills import MAX_CACHED_S, UNANNOUNCED_S, RelayedSkills
from gateway.catalog.skills import SkillCatalog
from gateway.protocol.errors import DigestMismatch
from gateway.protocol.skills import EXTENSION_ID, digest_of

pytestmark = pytest.mark.anyio
SKILL_MD = b"---\nname: pdf\ndescription: d\n---\nbody\n"


class Upstream:
    """A relaying upstream as the connector presents it: its manifest from ``files``, the bytes it serves
    from ``served`` where they differ (a change the manifest has not caught up with, or tampering)."""

    def __init__(self, *, announces: bool = False, ttl_ms: int | None = None) -> None:
        self.namespace = "r"
        self.capabilities = {"extensions": {EXTENSION_ID: {}}}
        self.ready = True
        self.settings = SimpleNamespace(relay_skills=True)
        self.announces_resource_changes = announces
        self.ttl_ms = ttl_ms
        self.files = {"skill://pdf/SKILL.md": SKILL_MD, "skill://pdf/a.md": b"first"}
        self.served: dict[str, bytes] = {}
        self.calls: Counter[str] = Counter()
        self.hold: anyio.Event | None = None
        self.holding = anyio.Event()

    async def request(
        self, method: str, params: dict[str, Any] | None, *, check: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        self.calls[method] += 1
        if method == "skills/list":
            if self.hold is not None:
                self.holding.set()
                await self.hold.wait()
            resources = [{"uri": u, "digest": digest_of(d), "size": len(d)} for u, d in self.files.items()]
            entry = {"uri": "skill://pdf/SKILL.md", "frontmatter": {"name": "pdf", "description": "d"}}
            result: dict[str, Any] = {"skills": [{**entry, "resources": resources}]}
            if self.ttl_ms is not None:
                result["ttlMs"] = self.ttl_ms
            return result
        assert method == "resources/read"
        assert params is not None
        data = self.served.get(params["uri"], self.files[params["uri"]])
        answer = {"contents": [{"uri": params["uri"], "text": data.decode()}]}
        if check is not None:
            check(answer)
        return answer


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_an_announcing_upstreams_manifests_are_held_until_it_announces_a_change() -> None:
    upstream, clock = Upstream(announces=True), Clock()
    relayed = RelayedSkills(upstream, clock=clock)
    await relayed.refresh()
    clock.now = MAX_CACHED_S - 1
    await relayed.refresh()
    assert upstream.calls["skills/list"] == 1
    relayed.invalidate()
    await relayed.refresh()
    assert upstream.calls["skills/list"] == 2
    clock.now += MAX_CACHED_S + 1  # held at most this long, announced or not
    await relayed.refresh()
    assert upstream.calls["skills/list"] == 3


@pytest.mark.parametrize(("ttl_ms", "held_s"), [(2000, 2.0), (None, UNANNOUNCED_S), (0, 0.0)])
async def test_a_silent_upstreams_manifests_are_held_for_its_ttl_or_a_short_bound(
    ttl_ms: int | None, held_s: float
) -> None:
    upstream, clock = Upstream(ttl_ms=ttl_ms), Clock()
    relayed = RelayedSkills(upstream, clock=clock)
    await relayed.refresh()
    clock.now = max(0.0, held_s - 0.01)
    await relayed.refresh()
    assert upstream.calls["skills/list"] == (1 if held_s > 0 else 2)
    clock.now = held_s + 0.01
    await relayed.refresh()
    assert upstream.calls["skills/list"] == (2 if held_s > 0 else 3)


async def test_a_change_announced_while_the_manifests_are_fetched_is_not_missed() -> None:
    upstream = Upstream(announces=True)
    relayed = RelayedSkills(upstream, clock=Clock())
    upstream.hold = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(relayed.refresh)
        await upstream.holding.wait()
        relayed.invalidate()  # the upstream changed while its old listing was on its way
        upstream.hold.set()
    assert not relayed.fresh  # what came is served to the requests waiting for it, not held
    upstream.hold = None
    await relayed.refresh()
    assert upstream.calls["skills/list"] == 2
    assert relayed.fresh


async def test_concurrent_requests_share_one_fetch() -> None:
    upstream = Upstream(announces=True)
    relayed = RelayedSkills(upstream, clock=Clock())
    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(relayed.refresh)
    assert upstream.calls["skills/list"] == 1


def skill_catalog(upstream: Upstream) -> SkillCatalog:
    return SkillCatalog([Mount(upstream, prefix="r__")], codec=CursorCodec(b"k" * 32), generation="g")  # type: ignore[arg-type]


async def test_bytes_of_a_change_not_yet_announced_are_read_against_the_new_manifest() -> None:
    upstream = Upstream(announces=True)
    skills = skill_catalog(upstream)
    await skills.list_skills({}, viewer=None)
    upstream.files["skill://pdf/a.md"] = b"second"  # changed, its announcement not yet arrived
    read = await skills.read_resource({"uri": "skill://r/pdf/a.md"}, viewer=None)
    assert read["contents"] == [{"uri": "skill://r/pdf/a.md", "text": "second"}]
    assert upstream.calls["skills/list"] == 2  # asked once more, then read again


async def test_bytes_matching_no_manifest_are_refused_after_one_more_look() -> None:
    upstream = Upstream(announces=True)
    skills = skill_catalog(upstream)
    await skills.list_skills({}, viewer=None)
    upstream.served["skill://pdf/a.md"] = b"tampered"
    with pytest.raises(DigestMismatch) as refused:
        await skills.read_resource({"uri": "skill://r/pdf/a.md"}, viewer=None)
    assert refused.value.error_type == "digest_mismatch"
    assert "(8 bytes where it lists 5)" in str(refused.value)  # (was "8 bytes, not 5, or another digest")
    assert upstream.calls["skills/list"] == 2
    assert upstream.calls["resources/read"] == 1  # the manifest did not change: not read twice
    upstream.calls.clear()
    skills.invalidate("r")
    with pytest.raises(DigestMismatch):  # a manifest fetched by this very request is not asked for again
        await skills.read_resource({"uri": "skill://r/pdf/a.md"}, viewer=None)
    assert upstream.calls["skills/list"] == 1
    upstream.served["skill://pdf/a.md"] = b"forth"  # the listed size, other bytes
    with pytest.raises(DigestMismatch, match=r"\(the same size, another sha256 digest\)"):
        await skills.read_resource({"uri": "skill://r/pdf/a.md"}, viewer=None)


async def test_one_bad_entry_is_left_out_and_a_skill_listed_twice_is_served_as_first_listed() -> None:
    """A tester's upstream listed a bare string among its skills: every skill of it was dropped
    (``skills.10: Input should be a valid dictionary``). And of two entries with one URI the second won,
    silently, its description no longer the file's."""
    upstream = Upstream()
    original = upstream.request

    async def request(method: str, params: dict[str, Any] | None, **kw: Any) -> dict[str, Any]:
        answer = await original(method, params, **kw)
        if method == "skills/list":
            [good] = answer["skills"]
            again = {**good, "frontmatter": {"name": "pdf", "description": "listed again"}}
            answer["skills"] = ["not an object", good, again, 7, None]
        return answer

    upstream.request = request  # type: ignore[method-assign]
    relayed = RelayedSkills(upstream, clock=Clock())
    await relayed.refresh()
    assert list(relayed.skills) == ["pdf"]
    assert relayed.skills["pdf"].description == "d"


async def test_a_relayed_file_named_with_escapes_is_served_and_read_by_its_escaped_uri() -> None:
    upstream = Upstream(announces=True)
    upstream.files["skill://pdf/a%23b%20c.txt"] = b"escaped"
    skills = skill_catalog(upstream)
    [entry] = (await skills.list_skills({}, viewer=None))["skills"]
    assert "skill://r/pdf/a%23b%20c.txt" in {r["uri"] for r in entry["resources"]}
    read = await skills.read_resource({"uri": "skill://r/pdf/a%23b%20c.txt"}, viewer=None)
    assert read["contents"][0]["text"] == "escaped"  # asked upstream by its own URI


@pytest.mark.parametrize(
    ("entry_uri", "extra"),
    [
        ("skill://my%20team/pdf/SKILL.md", None),  # a folder our URIs would escape again (reviewer)
        ("skill://my team/pdf/SKILL.md", None),
        ("skill://%2e%2e/pdf/SKILL.md", None),
        ("skill://pdf/SKILL.md", "skill://pdf/SKILL%2Emd"),  # two spellings of one file: one would hide the other
        ("skill://pdf/SKILL.md", ("skill://pdf/a%FF.txt", "skill://pdf/a%ff.txt")),
    ],
)
async def test_a_skill_whose_uris_cannot_be_spelt_one_way_is_not_relayed(
    entry_uri: str, extra: str | tuple[str, ...] | None
) -> None:
    upstream = Upstream()
    root = entry_uri.removesuffix("/SKILL.md")
    upstream.files = {entry_uri: SKILL_MD, f"{root}/a.md": b"a"}
    for uri in (extra,) if isinstance(extra, str) else extra or ():
        upstream.files[uri] = b"other"
    original = upstream.request

    async def request(method: str, params: dict[str, Any] | None, **kw: Any) -> dict[str, Any]:
        answer = await original(method, params, **kw)
        if method == "skills/list":
            answer["skills"][0]["uri"] = entry_uri
        return answer

    upstream.request = request  # type: ignore[method-assign]
    relayed = RelayedSkills(upstream, clock=Clock())
    await relayed.refresh()
    assert relayed.skills == {}


async def test_an_entry_left_out_is_said_once_not_at_every_refresh() -> None:
    """A silent upstream's manifests are asked for again every few seconds: each refusal was logged again
    each time (a tester's log repeated seven warnings at every request)."""
    from structlog.testing import capture_logs

    upstream = Upstream()
    original = upstream.request

    async def request(method: str, params: dict[str, Any] | None, **kw: Any) -> dict[str, Any]:
        answer = await original(method, params, **kw)
        if method == "skills/list":
            answer["skills"] = [*answer["skills"], "not an object"]
        return answer

    upstream.request = request  # type: ignore[method-assign]
    clock = Clock()
    relayed = RelayedSkills(upstream, clock=clock)
    with capture_logs() as logs:
        for _ in range(3):
            await relayed.refresh()
            clock.now += UNANNOUNCED_S + 1
    assert upstream.calls["skills/list"] == 3
    assert [e["event"] for e in logs if e["event"].startswith("upstream_skill")] == ["upstream_skill_refused"]
    assert list(relayed.skills) == ["pdf"]
