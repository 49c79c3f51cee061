"""Who is told of list changes: the live sessions and ``subscriptions/listen`` streams, each reached once
per change it may see (``Hub``), and a listen stream's own wait for the next change or its end
(``Subscription``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

import anyio

from gateway.catalog.policy import ALLOW_ALL, Viewer
from gateway.identity.principal import Identity
from gateway.protocol.lists import EVERY_LIST, NO_LIST, PROMPTS, SKILLS, Lists, united


class Listener(Protocol):
    viewer: Viewer | None

    @property
    def who(self) -> Identity | None: ...

    def list_changed(self, lists: Lists = EVERY_LIST) -> None: ...


Sees = Callable[[Viewer, frozenset[str]], bool]
"""Whether a viewer can see anything served by these upstreams (their namespaces)."""


class Subscription:
    """One ``subscriptions/listen`` stream: woken by list changes it asked for, or by the server closing;
    ended at ``until`` (the event loop's clock), when the credentials that opened it expire, as at a
    graceful close: a client that listens again does so with the token it has then, checked as every
    request is."""

    def __init__(
        self,
        *,
        prompts: bool,
        tools: bool = False,
        resources: bool = False,
        viewer: Viewer | None = None,
        who: Identity | None = None,
        until: float | None = None,
    ) -> None:
        self._wants = (PROMPTS if prompts or tools else NO_LIST) | (SKILLS if resources else NO_LIST)
        self.viewer = viewer
        self.who = who
        self._woken = anyio.Event()
        self._pending = NO_LIST
        self._closing = False
        self._until = until

    def list_changed(self, lists: Lists = EVERY_LIST) -> None:
        if self._wants & lists:
            self._pending |= self._wants & lists
            self._woken.set()

    def close(self) -> None:
        self._closing = True
        self._woken.set()

    async def next_change(self) -> Lists:
        """The lists that changed, of those it listens for (changes while one is being sent coalesce);
        none once closing. A change that came before the close is still delivered."""
        if self._until is None:
            await self._woken.wait()
        else:
            with anyio.move_on_at(self._until):
                await self._woken.wait()
            if not self._woken.is_set():  # the credentials expired: as a close
                self.close()
        if not self._closing:
            self._woken = anyio.Event()
        changed, self._pending = self._pending, NO_LIST
        return changed


def narrows_nothing(viewer: Viewer) -> bool:
    """Whether ``viewer`` hides nothing beyond the global policy (a token without a policy; a person
    matching no view): told of every change, as a caller without a viewer is. The filter judges what a
    viewer can see by the names listed before the change: a reviewer's person matching no view missed
    a prompt that became visible."""
    return viewer.key == ALLOW_ALL.key


class Hub:
    """The live sessions and subscriptions; ``broadcast_list_changed`` reaches each of them once."""

    def __init__(self, sees: Sees | None = None) -> None:
        self._listeners: set[Listener] = set()
        self._sees = sees

    def add(self, listener: Listener) -> None:
        self._listeners.add(listener)

    def discard(self, listener: Listener) -> None:
        self._listeners.discard(listener)

    def __len__(self) -> int:
        return len(self._listeners)

    def review_viewers(self, viewer_for: Callable[[Identity | None], Viewer | None]) -> None:
        """A reload changed who sees what (a token's policy, the views): each listener's viewer again, so
        that sessions already open list what their caller may see now."""
        for listener in self._listeners:
            listener.viewer = viewer_for(listener.who)

    def broadcast_list_changed(self, changed: Mapping[str, Lists] | None = None) -> int:
        """Tell every listener which lists changed of the ``changed`` upstreams it may see something of
        (the lists of each upstream by its namespace; None: anything may have changed). A listener is
        told nothing of an upstream its view shows nothing of: a change it cannot see is none of its
        business, and the notification alone would say that something hidden moved (a hidden upstream's
        prompts changing beside a visible one's skills is no prompts/list_changed for it)."""
        everything = united(changed)
        judged: dict[str, Lists] = {}  # by viewer: listeners share a few (a token's policy, a view)
        told = 0
        for listener in self._listeners:
            viewer = listener.viewer
            if changed is None or viewer is None or narrows_nothing(viewer) or self._sees is None:
                lists = everything
            elif (kept := judged.get(viewer.key)) is not None:
                lists = kept
            else:
                sees = self._sees
                lists = NO_LIST.union(*(kinds for ns, kinds in changed.items() if sees(viewer, frozenset({ns}))))
                judged[viewer.key] = lists
            if lists:
                listener.list_changed(lists)
                told += 1
        return told

    def close_subscriptions(self) -> None:
        """Shutting down: every listen stream answers its request (a graceful end) and closes."""
        for listener in self._listeners:
            if isinstance(listener, Subscription):
                listener.close()
