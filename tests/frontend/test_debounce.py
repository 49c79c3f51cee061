"""The list_changed debouncer: a burst becomes one fan-out, and start-up's ``forget`` never mutes it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from gateway.catalog.policy import Rules, Viewer
from gateway.frontend.debounce import ListChangedDebouncer
from gateway.frontend.hub import Hub, Subscription
from gateway.observability.metrics import Metrics
from gateway.protocol.lists import EVERY_LIST, PROMPTS, SKILLS

pytestmark = pytest.mark.anyio


class Counting:
    def __init__(self, viewer: Viewer | None = None) -> None:
        self.count = 0
        self.viewer = viewer

    def list_changed(self, _lists: object = None) -> None:
        self.count += 1


def debouncer_with(*listeners: Counting | Subscription, delay_s: float = 0.0) -> ListChangedDebouncer:
    hub = Hub()
    for listener in listeners:
        hub.add(listener)
    return ListChangedDebouncer(delay_s, hub, Metrics())


@asynccontextmanager
async def running(debouncer: ListChangedDebouncer) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(debouncer.run)
        yield
        tg.cancel_scope.cancel()


async def test_a_change_after_a_forget_with_nothing_due_is_still_announced() -> None:
    """At start-up nothing may have been due when ``forget`` ran (no upstream ready yet): an upstream that
    connects later must still be announced. ``forget`` used to swap the event ``run`` was waiting on."""
    subscription = Subscription(prompts=True)
    debouncer = debouncer_with(subscription)
    async with running(debouncer):
        await anyio.wait_all_tasks_blocked()  # run waits for a change
        debouncer.forget()
        debouncer.poke()
        with anyio.fail_after(5):
            assert await subscription.next_change()


async def test_a_change_after_a_fan_out_and_a_forget_is_still_announced() -> None:
    subscription = Subscription(prompts=True)
    debouncer = debouncer_with(subscription)
    async with running(debouncer):
        debouncer.poke()
        with anyio.fail_after(5):
            assert await subscription.next_change()
        await anyio.wait_all_tasks_blocked()
        debouncer.forget()
        debouncer.poke()
        with anyio.fail_after(5):
            assert await subscription.next_change()


async def test_a_burst_becomes_one_fan_out() -> None:
    listener = Counting()
    debouncer = debouncer_with(listener)
    async with running(debouncer):
        for _ in range(100):
            debouncer.poke()
        await anyio.wait_all_tasks_blocked()
        assert listener.count == 1


async def test_a_change_forgotten_before_it_was_gathered_is_not_announced() -> None:
    listener = Counting()
    debouncer = debouncer_with(listener)
    debouncer.poke()
    debouncer.forget()  # start-up: no client has seen a list, so nothing changed for anyone
    async with running(debouncer):
        await anyio.wait_all_tasks_blocked()
        assert listener.count == 0


async def test_a_change_is_announced_only_to_listeners_whose_view_shows_that_upstream() -> None:
    """A person whose view shows nothing of an upstream is not told that it changed: the notification
    alone would say that something hidden moved. A reload (no namespace) is announced to everyone."""
    eng_only, no_eng = Rules(allow=("eng__*",)), Rules(deny=("eng__*",))
    engineer, other, everyone = Counting(eng_only), Counting(no_eng), Counting(None)

    def sees(viewer: Viewer, namespaces: frozenset[str]) -> bool:
        return any(viewer.may_allow_under(f"{namespace}__") for namespace in namespaces)

    hub = Hub(sees=sees)
    for listener in (engineer, other, everyone):
        hub.add(listener)
    debouncer = ListChangedDebouncer(0.0, hub, Metrics())
    async with running(debouncer):
        await anyio.wait_all_tasks_blocked()
        debouncer.poke("eng")
        with anyio.fail_after(5):
            while engineer.count == 0:
                await anyio.wait_all_tasks_blocked()
        assert (engineer.count, other.count, everyone.count) == (1, 0, 1)
        debouncer.poke(None)
        with anyio.fail_after(5):
            while other.count == 0:
                await anyio.wait_all_tasks_blocked()
        assert (engineer.count, other.count, everyone.count) == (2, 1, 2)


class _Listener:
    def __init__(self, viewer: object) -> None:
        self.viewer, self.told = viewer, 0

    def list_changed(self, _lists: object = None) -> None:
        self.told += 1


@pytest.mark.anyio
async def test_a_viewer_that_hides_nothing_is_told_of_a_prompt_that_became_visible() -> None:
    """A reviewer: a person matching no view (an allow-all viewer, so that their listing is private)
    missed a list_changed an anonymous caller got: the filter judges a viewer by the names listed before
    the change, and the upstream's only prompt then was hidden by the global policy."""
    from gateway.app import NO_VIEW
    from gateway.catalog.catalog import Catalog
    from gateway.catalog.cursor import CursorCodec
    from gateway.catalog.mounts import Mount
    from gateway.catalog.policy import Rules
    from gateway.frontend.hub import Hub
    from gateway.testing import FakePromptSource

    source = FakePromptSource("a", [{"name": "draft_x"}])  # its only prompt, hidden by the global policy
    catalog = Catalog(
        [Mount(source, prefix="a__", rules=Rules())],
        codec=CursorCodec(b"s" * 32),
        generation="g",
        policy=Rules(deny=("a__draft_*",), separator="__"),
    )
    assert (await catalog.list_prompts(None, viewer=NO_VIEW))["prompts"] == []
    hub = Hub(sees=lambda viewer, namespaces: catalog.shows_any(namespaces, viewer))
    anonymous, person, limited = _Listener(None), _Listener(NO_VIEW), _Listener(Rules(allow=("b__*",)))
    for listener in (anonymous, person, limited):
        hub.add(listener)  # type: ignore[arg-type]
    source.prompts.append({"name": "guide"})
    catalog.invalidate("a")
    hub.broadcast_list_changed({"a": PROMPTS})
    assert (anonymous.told, person.told, limited.told) == (1, 1, 0)  # one that sees nothing of it still isn't


async def test_a_burst_is_announced_as_the_lists_it_changed() -> None:
    """A listen stream hears only of the lists it asked for that changed: one asking for skill files
    (resources) is not woken by a prompt list's change, nor one asking for prompts by a skill's; a burst
    touching both, or a reload, is both."""
    prompts_only, skills_only, both = (
        Subscription(prompts=True),
        Subscription(prompts=False, resources=True),
        Subscription(prompts=True, resources=True),
    )
    debouncer = debouncer_with(prompts_only, skills_only, both)
    async with running(debouncer):
        debouncer.poke("team", SKILLS)
        with anyio.fail_after(5):
            assert await skills_only.next_change() == SKILLS
            assert await both.next_change() == SKILLS
        debouncer.poke("team", PROMPTS)
        with anyio.fail_after(5):
            assert await prompts_only.next_change() == PROMPTS  # woken by this change, not the skills'
            assert await both.next_change() == PROMPTS
        debouncer.poke("team", SKILLS)
        debouncer.poke("other", PROMPTS)
        with anyio.fail_after(5):
            assert await both.next_change() == EVERY_LIST
            assert await skills_only.next_change() == SKILLS
            assert await prompts_only.next_change() == PROMPTS
        debouncer.poke()  # a reload: anything may have changed
        with anyio.fail_after(5):
            assert await skills_only.next_change() == SKILLS
            assert await prompts_only.next_change() == PROMPTS


async def test_a_viewer_is_told_only_the_lists_of_the_upstreams_it_sees() -> None:
    """A reviewer: a burst's lists were merged across upstreams before the viewer filter, so a viewer
    that sees only an upstream whose skills changed was also told prompts/list_changed for a hidden
    upstream's prompts (the notification alone said that something hidden moved)."""

    class Told:
        def __init__(self, viewer: Viewer | None) -> None:
            self.viewer, self.lists = viewer, []  # type: list[frozenset[str]]

        def list_changed(self, lists: frozenset[str] = EVERY_LIST) -> None:
            self.lists.append(lists)

    def sees(viewer: Viewer, namespaces: frozenset[str]) -> bool:
        return any(viewer.may_allow_under(f"{namespace}__") for namespace in namespaces)

    hub = Hub(sees=sees)
    docs_only, everyone = Told(Rules(allow=("docs__*",))), Told(None)
    hub.add(docs_only)
    hub.add(everyone)
    debouncer = ListChangedDebouncer(0.0, hub, Metrics())
    async with running(debouncer):
        debouncer.poke("docs", SKILLS)
        debouncer.poke("eng", PROMPTS)
        with anyio.fail_after(5):
            while not everyone.lists:
                await anyio.wait_all_tasks_blocked()
        debouncer.poke("eng", PROMPTS)  # nothing it can see: it is not told at all
        with anyio.fail_after(5):
            while len(everyone.lists) < 2:
                await anyio.wait_all_tasks_blocked()
    assert (docs_only.lists, everyone.lists) == ([SKILLS], [EVERY_LIST, PROMPTS])


@pytest.mark.anyio
async def test_a_viewer_is_told_of_a_prompt_the_change_made_visible_beside_another_upstreams_skills() -> None:
    """A reviewer: judged by what each upstream listed before the change, a viewer allowed ``a__guide``
    (while ``a`` listed only a prompt it may not see) was told only of ``b``'s skills when ``a`` added
    ``guide`` in the same burst, and never listed it. The rules that may show a name of it count too."""
    from gateway.catalog.catalog import Catalog
    from gateway.catalog.cursor import CursorCodec
    from gateway.catalog.mounts import Mount
    from gateway.testing import FakePromptSource

    a, b = FakePromptSource("a", [{"name": "other"}]), FakePromptSource("b", [{"name": "x"}])
    catalog = Catalog(
        [Mount(a, prefix="a__", rules=Rules()), Mount(b, prefix="b__", rules=Rules())],
        codec=CursorCodec(b"s" * 32),
        generation="g",
    )
    viewer = Rules(allow=("a__guide", "b__*"))
    assert [p["name"] for p in (await catalog.list_prompts(None, viewer=viewer))["prompts"]] == ["b__x"]
    hub = Hub(sees=lambda viewer, namespaces: catalog.shows_any(namespaces, viewer))
    told: list[frozenset[str]] = []

    class Told:
        def __init__(self, viewer: Viewer) -> None:
            self.viewer = viewer

        def list_changed(self, lists: frozenset[str] = EVERY_LIST) -> None:
            told.append(lists)

    hub.add(Told(viewer))
    hub.add(Told(Rules(deny=("a__*",), allow=("b__*",))))  # sees nothing of a: b's skills only
    a.prompts.append({"name": "guide"})
    catalog.invalidate("a")
    hub.broadcast_list_changed({"a": PROMPTS, "b": SKILLS})
    assert sorted(told, key=len) == [SKILLS, EVERY_LIST]
