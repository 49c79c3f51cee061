"""Following a prompt folder as it is edited, and also when the folder itself is replaced.

The operating system watches a folder by its inode (inotify on Linux), not by its name. A folder
deleted and made again (``rm -rf prompts && mkdir prompts``), swapped for another (an atomic ``mv``, a
re-clone, a ``git checkout`` that recreates it) or moved away with its parent leaves the watch on an
inode that is no longer at the path: the watch reports the removal once and then nothing, ever. So the
folder is watched together with its parent (not recursively: the parent may be a large tree), and
whenever the folder or its parent is added, removed or renamed, or the folder at the path is not the
one watched, the watch is armed again on what is at the path now and the folder is read again. A
folder that is gone is waited for, by watching the nearest folder above it that exists.

``watchfiles``' ``RustNotify`` is used directly rather than ``awatch``: ``awatch`` arms its watch
lazily inside its generator, so a file written between a re-read and that moment would be missed until
the next edit, where here the watch is armed first and the folder read after.
"""

from __future__ import annotations

import functools
import os
import platform
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

import anyio
import anyio.abc
from watchfiles._rust_notify import RustNotify

Reason = Literal["changed", "replaced", "missing", "back", "armed"]
"""Why the folder is read again: a file in it changed; the folder at the path is another one now; the
folder is gone; it is back after being gone."""

DEBOUNCE_MS = 50
STEP_MS = 25
RECHECK_MS = 5_000
"""How long a quiet watch waits before checking that the folder at the path is still the one watched:
the safety net for what no watch here can see (a folder further up replaced)."""
_MODIFIED = 2  # watchfiles.Change.modified: a folder's own attributes, not its identity


def _identity(path: Path) -> tuple[int, int] | None:
    """The folder at ``path`` (through a symbolic link), as device and inode; None if none is there."""
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISDIR(status.st_mode) else None


def _nearest_existing(path: Path) -> Path:
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path


def _force_polling() -> bool:
    """As ``awatch`` decides: ``WATCHFILES_FORCE_POLLING`` set (and not ``false``), or WSL, where
    notifications from Windows drives never arrive."""
    setting = os.environ.get("WATCHFILES_FORCE_POLLING")
    if setting:
        return setting.lower() not in {"false", "disable", "disabled"}
    uname = platform.uname()
    return "microsoft-standard" in uname.release.lower() and uname.system.lower() == "linux"


async def _arm(path: Path, *, recursive: bool, limiter: anyio.CapacityLimiter) -> RustNotify:
    """A watch on ``path``, armed when this returns (walking a large tree takes a while: off the loop).
    ``FileNotFoundError`` if ``path`` is gone."""
    delay = os.environ.get("WATCHFILES_POLL_DELAY_MS", "")
    make = functools.partial(
        RustNotify, [str(path)], False, _force_polling(), int(delay) if delay.isdecimal() else 300, recursive, False
    )
    return await anyio.to_thread.run_sync(make, limiter=limiter)


async def _set_when_cancelled(stop: anyio.Event) -> None:
    try:
        await anyio.sleep_forever()
    finally:
        stop.set()


async def _next_batch(watcher: RustNotify, limiter: anyio.CapacityLimiter) -> set[tuple[int, str]]:
    """The next changes seen (empty after ``RECHECK_MS`` of quiet). The watching thread checks ``stop``
    every step, so a cancelled wait ends within one, where otherwise it would run out its timeout."""
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_set_when_cancelled, stop)
        seen = await anyio.to_thread.run_sync(watcher.watch, DEBOUNCE_MS, STEP_MS, RECHECK_MS, stop, limiter=limiter)
        tg.cancel_scope.cancel()
    return seen if isinstance(seen, set) else set()


class FolderWatch:
    """Calls ``reread`` with the reason each time the folder at ``root`` should be read again."""

    def __init__(self, root: Path, reread: Callable[[Reason], Awaitable[None]]) -> None:
        self._root = Path(os.path.abspath(root))  # not resolved: a link at the path is followed by name
        self._parent = self._root.parent
        self._reread = reread
        self._limiter = anyio.CapacityLimiter(2)
        """The watches wait on threads of their own (two at most): on the default limiter, a few
        folders' parked watches would take every thread the rest of the gateway has."""

    async def follow(self) -> None:
        """Until cancelled. The caller has read the folder once already."""
        present = _identity(self._root) is not None
        owed: Reason | None = "armed"  # a file written between the caller's read and the first watch
        while True:
            if _identity(self._root) is None:
                if present:
                    await self._reread("missing")
                await self._until_present()
                owed = "back"
            present = True
            try:
                folder = await _arm(self._root, recursive=True, limiter=self._limiter)
            except FileNotFoundError:
                continue
            try:
                try:
                    parent = await _arm(self._parent, recursive=False, limiter=self._limiter)
                except FileNotFoundError:
                    continue
                try:
                    await self._watch(folder, parent, owed)
                finally:
                    parent.close()
            finally:
                folder.close()
            owed = "replaced"

    async def _watch(self, folder: RustNotify, parent: RustNotify, owed: Reason | None) -> None:
        """Re-read on every change in the folder; return once the folder at the path is another one
        (or none), for the caller to arm a new watch."""
        identity = _identity(self._root)
        if owed is not None:
            await self._reread(owed)
        send, receive = anyio.create_memory_object_stream[tuple[bool, set[tuple[int, str]]]](4)
        async with receive, anyio.create_task_group() as tg:
            tg.start_soon(self._forward, folder, True, send.clone())
            tg.start_soon(self._forward, parent, False, send)
            async for in_folder, seen in receive:
                if _identity(self._root) != identity or self._touches_the_folder(seen):
                    break
                if in_folder and seen:
                    await self._reread("changed")
            tg.cancel_scope.cancel()

    def _touches_the_folder(self, seen: set[tuple[int, str]]) -> bool:
        """The folder or its parent added, removed or renamed (a rename is a removal here), however the
        inodes compare: ``rm -rf`` then ``mkdir`` may hand the new folder the old one's inode."""
        own = {str(self._root), str(self._parent)}
        return any(path in own for change, path in seen if change != _MODIFIED)

    async def _forward(
        self, watcher: RustNotify, in_folder: bool, send: anyio.abc.ObjectSendStream[tuple[bool, set[tuple[int, str]]]]
    ) -> None:
        async with send:
            while True:
                await send.send((in_folder, await _next_batch(watcher, self._limiter)))

    async def _until_present(self) -> None:
        """Wait for a folder at the path, watching the nearest folder above it that exists (and the next
        one down as soon as that one is made)."""
        while _identity(self._root) is None:
            above = _nearest_existing(self._parent)
            try:
                watcher = await _arm(above, recursive=False, limiter=self._limiter)
            except FileNotFoundError:
                continue
            try:
                while _identity(self._root) is None and _nearest_existing(self._parent) == above:
                    await _next_batch(watcher, self._limiter)
            finally:
                watcher.close()
