"""A folder of prompt files replaced under a running gateway (``rm -rf`` then ``mkdir``, an atomic ``mv``,
deleted and made again later, moved with its parent, a symbolic link switched): the gateway follows the
folder at the path, announces list_changed, says so in its log, and keeps picking up later edits.

A watch is on an inode, not a name: before, one change was picked up and every later edit was ignored
with nothing logged, while stale prompts were served."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.integration.helpers import ListChangedWatcher, RunningGateway, running_gateway, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def folder(path: Path, *names: str) -> Path:
    path.mkdir(parents=True)
    for name in names:
        (path / f"{name}.md").write_text(f"The {name} prompt.")
    return path


@asynccontextmanager
async def serving(tmp_path: Path, path: Path) -> AsyncIterator[tuple[RunningGateway, Client, ListChangedWatcher]]:
    upstream = {"namespace": "team", "transport": "files", "path": str(path)}
    config = write_config(tmp_path / "c.toml", [upstream], server={"transport": "http", "port": 0})
    changes = ListChangedWatcher()
    async with (
        running_gateway(config) as gateway,
        Client(f"{gateway.url}/mcp", mode="legacy", cache=None, message_handler=changes) as client,
    ):
        yield gateway, client, changes


async def until_listed(client: Client, changes: ListChangedWatcher, *names: str) -> None:
    """Until the gateway lists exactly ``names``, each new listing awaited as a list_changed."""
    want = sorted(f"team__{name}" for name in names)
    with anyio.fail_after(60):
        while sorted(p.name for p in (await client.list_prompts()).prompts) != want:
            await changes.wait(60)


async def still_followed(root: Path, client: Client, changes: ListChangedWatcher, *names: str) -> None:
    """A new file, then an edit that removes a prompt, both reach the client: the watch is armed on the
    folder now at the path."""
    (root / "later.md").write_text("Written later.")
    await until_listed(client, changes, *names, "later")
    (root / "later.md").rename(root / "later.txt")
    await until_listed(client, changes, *names)


async def test_a_folder_removed_and_made_again_at_once_is_followed(tmp_path: Path) -> None:
    root = folder(tmp_path / "prompts", "old")
    async with serving(tmp_path, root) as (_, client, changes):
        await until_listed(client, changes, "old")
        shutil.rmtree(root)
        folder(root, "new")
        await until_listed(client, changes, "new")
        await still_followed(root, client, changes, "new")


async def test_a_folder_swapped_by_rename_is_followed_and_the_old_one_forgotten(tmp_path: Path) -> None:
    root = folder(tmp_path / "prompts", "old")
    async with serving(tmp_path, root) as (gateway, client, changes):
        await until_listed(client, changes, "old")
        replacement = folder(tmp_path / "prompts.new", "new")
        root.rename(tmp_path / "prompts.old")
        replacement.rename(root)
        await gateway.wait_for_event("prompt_folder_replaced", upstream="team")
        await until_listed(client, changes, "new")
        (tmp_path / "prompts.old" / "stale.md").write_text("In the folder moved away.")
        await still_followed(root, client, changes, "new")
        assert "team__stale" not in [p.name for p in (await client.list_prompts()).prompts]


async def test_a_folder_deleted_and_made_again_later_comes_back(tmp_path: Path) -> None:
    root = folder(tmp_path / "prompts", "old")
    async with serving(tmp_path, root) as (gateway, client, changes):
        await until_listed(client, changes, "old")
        shutil.rmtree(root)
        missing = await gateway.wait_for_event("prompt_folder_missing", upstream="team")
        assert missing["path"] == str(root)
        await until_listed(client, changes)
        folder(root, "new")
        await gateway.wait_for_event("prompt_folder_back", upstream="team")
        await until_listed(client, changes, "new")
        await still_followed(root, client, changes, "new")


async def test_a_folder_moved_away_with_its_parent_is_followed(tmp_path: Path) -> None:
    root = folder(tmp_path / "project" / "prompts", "old")
    async with serving(tmp_path, root) as (_, client, changes):
        await until_listed(client, changes, "old")
        (tmp_path / "project").rename(tmp_path / "project.old")
        folder(root, "new")
        await until_listed(client, changes, "new")
        await still_followed(root, client, changes, "new")


async def test_a_folder_missing_at_start_is_served_once_made(tmp_path: Path) -> None:
    """Said as the docs say: a warning that it is missing, and the upstream down but coming back by
    itself (``backing-off``), then ``ready`` (a tester saw ``failed``, given up, logged at info level,
    no ``prompt_folder_missing``, and no state event once the folder was there)."""
    root = tmp_path / "checkout" / "prompts"
    async with serving(tmp_path, root) as (gateway, client, changes):
        down = await gateway.wait_for_event("upstream_state", upstream="team")
        assert (down["state"], down["level"]) == ("backing-off", "warning")
        assert (await gateway.wait_for_event("prompt_folder_missing", upstream="team"))["path"] == str(root)
        assert not (await client.list_prompts()).prompts
        (tmp_path / "checkout").mkdir()
        folder(root, "new")
        await gateway.wait_for_event("prompt_folder_back", upstream="team")
        assert (await gateway.wait_for_event("upstream_state", upstream="team"))["state"] == "ready"
        await until_listed(client, changes, "new")
        await still_followed(root, client, changes, "new")


async def test_a_switched_symbolic_link_is_followed_to_its_new_folder(tmp_path: Path) -> None:
    folder(tmp_path / "v1", "old")
    folder(tmp_path / "v2", "new")
    root = tmp_path / "current"
    root.symlink_to(tmp_path / "v1")
    async with serving(tmp_path, root) as (_, client, changes):
        await until_listed(client, changes, "old")
        (tmp_path / "next").symlink_to(tmp_path / "v2")
        os.replace(tmp_path / "next", root)  # how a deployment switches releases at once
        await until_listed(client, changes, "new")
        await still_followed(root, client, changes, "new")


async def test_many_watched_folders_each_announce_their_edits(tmp_path: Path) -> None:
    """Each watch waits on a thread: on anyio's default forty, the forty-first folder's watch never began,
    and every other use of a thread in the gateway waited behind the parked watches."""
    roots = [folder(tmp_path / f"p{number}", f"old{number}") for number in range(45)]
    upstreams = [{"namespace": f"t{n}", "transport": "files", "path": str(root)} for n, root in enumerate(roots)]
    config = write_config(tmp_path / "c.toml", upstreams, server={"transport": "http", "port": 0})
    changes = ListChangedWatcher()
    async with (
        running_gateway(config) as gateway,
        Client(f"{gateway.url}/mcp", mode="legacy", cache=None, message_handler=changes) as client,
    ):
        (roots[-1] / "new.md").write_text("Written later.")
        with anyio.fail_after(60):
            while "t44__new" not in [p.name for p in (await client.list_prompts()).prompts]:
                await changes.wait(60)


async def test_a_note_or_a_broken_file_is_logged_once_not_at_every_read(tmp_path: Path) -> None:
    """Every read of the folder logged every note and broken file again: twice at start (the read that
    arms the watch), and again at each edit of another file."""
    root = folder(tmp_path / "prompts", "fine")
    commands = root / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "review-pr.md").write_text(
        "---\nargument-hint: [pr-number] [priority] [assignee]\n---\nReview PR #$1 with priority $2, for $3.\n"
    )
    (root / "broken.md").write_text("{% for x in y %}never ended")
    async with serving(tmp_path, root) as (gateway, client, changes):
        await until_listed(client, changes, "fine", "review-pr")
        (root / "later.md").write_text("Written later.")
        await gateway.wait_for_event("prompt_files_changed", upstream="team", prompts=3)
        (root / "broken.md").write_text("{% if x %}still not ended")
        await gateway.wait_for_event("prompt_files_changed", upstream="team", prompts=3)
    notes = [e["note"] for e in gateway.events if e.get("event") == "prompt_file_note"]
    broken = [e["problem"] for e in gateway.events if e.get("event") == "prompt_file_broken"]
    assert len(notes) == 1, notes
    assert "review-pr.md" in notes[0]
    assert len(broken) == 2, broken  # the first error, then the edit's other one
    assert "endfor" in broken[0]
    assert "endif" in broken[1]
