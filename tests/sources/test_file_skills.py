"""Skill folders read for the Skills extension: front matter verbatim, a complete manifest with digests,
and the skills the spec does not allow left out with the reason."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from gateway.sources.files.skills import scan_skills

PDF = b"""---
name: pdf-processing
description: Extract, fill, and assemble PDF documents
license: Apache-2.0
metadata:
  version: "2.1.0"
  released: 2026-01-02
allowed-tools: Bash(python:*)
---
# PDF processing
"""


def skill(root: Path, path: str, front: bytes, **files: bytes) -> Path:
    folder = root / path
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_bytes(front)
    for name, data in files.items():
        (folder / name.replace("__", "/")).parent.mkdir(parents=True, exist_ok=True)
        (folder / name.replace("__", "/")).write_bytes(data)
    return folder


def front(name: str, description: str = "Does things") -> bytes:
    return f"---\nname: {name}\ndescription: {description}\n---\nBody\n".encode()


def test_a_skill_is_its_front_matter_as_written_and_every_file_with_its_digest(tmp_path: Path) -> None:
    skill(tmp_path, ".claude/skills/pdf-processing", PDF, templates__invoice_md=b"invoice", logo_bin=b"\xff\x00")
    scanned = scan_skills(tmp_path, plugin=False)
    assert scanned.problems == {}
    pdf = scanned.skills["pdf-processing"]
    assert pdf.frontmatter == {
        "name": "pdf-processing",
        "description": "Extract, fill, and assemble PDF documents",
        "license": "Apache-2.0",
        "metadata": {"version": "2.1.0", "released": "2026-01-02"},  # the date as written, not a date
        "allowed-tools": "Bash(python:*)",
    }
    assert sorted(pdf.files) == ["SKILL.md", "logo_bin", "templates/invoice_md"]
    for path, file in pdf.files.items():
        data = (tmp_path / ".claude/skills/pdf-processing" / path).read_bytes()
        assert file.data == data
        assert file.digest == "sha256:" + hashlib.sha256(data).hexdigest()
    assert pdf.directories == {"", "templates"}


def test_skills_that_the_spec_does_not_allow_are_left_out_with_the_reason(tmp_path: Path) -> None:
    skill(tmp_path, ".claude/skills/no-name", b"---\ndescription: x\n---\nbody\n")
    skill(tmp_path, ".claude/skills/other", front("not-other"))
    skill(tmp_path, ".claude/skills/Upper", front("Upper"))
    skill(tmp_path, ".claude/skills/plain", b"no front matter\n")
    skill(tmp_path, ".claude/skills/broken", b"---\nname: [broken\n---\n")
    skill(tmp_path, ".claude/skills/good", front("good"))
    skill(tmp_path, ".claude/skills/numbered", b"---\nname: numbered\ndescription: 12345\n---\n")
    long = (
        "Use when " + "the task mentions an API " * 42
    )  # 1058 characters (YAML drops the last space), as a popular skill's
    skill(tmp_path, ".claude/skills/wordy", f"---\nname: wordy\ndescription: {long}\n---\n".encode())
    skill(tmp_path, ".claude/skills/just-right", f"---\nname: just-right\ndescription: {'é' * 1024}\n---\n".encode())
    scanned = scan_skills(tmp_path, plugin=False)
    assert sorted(scanned.skills) == ["good", "just-right"]  # 1024 characters (2048 bytes) is the limit
    problems = "\n".join(scanned.problems.values())
    assert ".claude/skills/no-name/SKILL.md: not served as a skill: its front matter has no name" in problems
    assert "the name 'not-other' is not its folder's ('other')" in problems
    # a tester read "has no description" of a description YAML made a number
    assert "numbered/SKILL.md: not served as a skill: its front matter's description is not text (12345" in problems
    assert "'Upper' breaks the Agent Skills naming rules" in problems
    assert "does not begin with YAML front matter" in problems
    assert "front matter is not valid YAML" in problems
    assert (
        "wordy/SKILL.md: not served as a skill: its description is 1058 characters, above the spec's limit" in problems
    )


def test_a_link_out_of_the_skill_is_refused_and_hidden_files_are_no_part_of_it(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    folder = skill(tmp_path / "repo", ".claude/skills/linked", front("linked"))
    os.symlink(outside, folder / "leak.txt")
    skill(tmp_path / "repo", ".claude/skills/hidden", front("hidden"), _x=b"")
    (tmp_path / "repo/.claude/skills/hidden/.env").write_text("TOKEN=1")
    scanned = scan_skills(tmp_path / "repo", plugin=False)
    assert (
        "leak.txt is a symbolic link to a file outside the skill's folder"
        in scanned.problems[".claude/skills/linked/SKILL.md"]
    )
    assert sorted(scanned.skills["hidden"].files) == ["SKILL.md", "_x"]


def test_nested_skills_and_prefixes_and_a_plugins_skills(tmp_path: Path) -> None:
    skill(tmp_path, "billing/.claude/skills/refunds", front("refunds"), guide_md=b"g")
    skill(tmp_path, "billing/.claude/skills/refunds/email", front("email"))
    scanned = scan_skills(tmp_path, plugin=False)
    assert sorted(scanned.skills) == ["billing/refunds", "billing/refunds/email"]
    assert sorted(scanned.skills["billing/refunds"].files) == ["SKILL.md", "email/SKILL.md", "guide_md"]
    plugin = tmp_path / "plugin"
    skill(plugin, "skills/review", front("review"))
    skill(plugin, "commands/x", front("x"))  # not where a plugin keeps skills
    assert list(scan_skills(plugin, plugin=True).skills) == ["review"]
    own = tmp_path / "home/.claude/skills"
    skill(own, "deploy", front("deploy"))
    assert list(scan_skills(own, plugin=False).skills) == ["deploy"]


def test_the_specs_limits_are_kept(tmp_path: Path) -> None:
    folder = skill(tmp_path, ".claude/skills/many", front("many"))
    for i in range(512):
        (folder / f"f{i}").write_bytes(b"")
    scanned = scan_skills(tmp_path, plugin=False)
    assert "more than 512 files" in scanned.problems[".claude/skills/many/SKILL.md"]


def test_served_as_skills_alone_a_skill_is_no_prompt_and_takes_no_name(tmp_path: Path) -> None:
    """Under ``skills_as = "skills"`` a SKILL.md is no prompt: no prompt-name note is said of it (a new
    user saw ``'refunds' is taken by ...: served as 'billing-refunds'``), and a command keeps its name."""
    from gateway.config.upstreams import FilesUpstream
    from gateway.sources.files.source import FilePromptSource

    skill(tmp_path, ".claude/skills/refunds", front("refunds"))
    skill(tmp_path, "billing/.claude/skills/refunds", front("refunds"))
    skill(tmp_path, ".claude/skills/deploy", front("deploy"))
    (tmp_path / ".claude/commands").mkdir()
    (tmp_path / ".claude/commands/deploy.md").write_text("Deploy\n")
    settings = {"namespace": "team", "transport": "files", "path": str(tmp_path)}
    only = FilePromptSource(FilesUpstream.model_validate({**settings, "skills_as": "skills"}), on_change=print)
    only._load()
    assert (only.notes, sorted(only.prompts), sorted(only.skills)) == (
        [],
        ["deploy"],
        [
            "billing/refunds",
            "deploy",
            "refunds",
        ],
    )
    both = FilePromptSource(FilesUpstream.model_validate({**settings, "skills_as": "both"}), on_change=print)
    both._load()
    assert len(both.notes) == 2  # served as prompts too, these names are shared


def test_a_skills_folder_served_itself_has_the_prompts_of_the_project_around_it(tmp_path: Path) -> None:
    """``path`` pointing at a ``.claude/skills`` folder (one of the documented layouts) made every other
    Markdown file of its skills a prompt (a tester: 38 prompts from 14 skills, ``x__CREATION-LOG`` among
    them); the project around it served 14. A skill's supporting files are its own, not prompts."""
    from gateway.config.upstreams import FilesUpstream
    from gateway.sources.files.source import FilePromptSource

    tdd = skill(tmp_path, ".claude/skills/tdd", front("tdd"))
    (tdd / "CREATION-LOG.md").write_text("# log\n")
    (tdd / "examples").mkdir()
    (tdd / "examples/pressure-1.md").write_text("# pressure\n")
    review = skill(tmp_path, ".claude/skills/team/review", front("review"))
    (review / "checklist.md").write_text("- [ ] tests\n")
    served = {}
    for path in (tmp_path, tmp_path / ".claude/skills"):
        settings = {"namespace": "x", "transport": "files", "path": str(path), "skills_as": "both"}
        source = FilePromptSource(FilesUpstream.model_validate(settings), on_change=print)
        source._load()
        served[path] = (sorted(source.prompts), sorted(source.skills), source.problems)
    assert served[tmp_path] == served[tmp_path / ".claude/skills"]
    assert served[tmp_path][0] == ["review", "tdd"]

    # one skill's own folder served is a folder like any other, as before (a reviewer: the first version of
    # this fix made it serve nothing, no prompt and no skill, and say nothing)
    settings = {"namespace": "x", "transport": "files", "path": str(tdd), "skills_as": "both"}
    one = FilePromptSource(FilesUpstream.model_validate(settings), on_change=print)
    one._load()
    assert sorted(one.prompts) == ["CREATION-LOG", "pressure-1", "tdd"]


def test_skill_files_in_no_skills_layout_are_said_not_dropped_without_a_word(tmp_path: Path) -> None:
    """A tester cloned a skills repository's ``skills/`` folder and served it with ``skills_as =
    "skills"``: its 17 SKILL.md files were neither skills nor prompts, and ``check`` said nothing."""
    from gateway.config.upstreams import FilesUpstream
    from gateway.sources.files.source import FilePromptSource

    for name in ("docx", "pdf", "pptx", "xlsx", "zip"):
        skill(tmp_path, name, front(name))
    (tmp_path / "pdf/notes.md").write_text("notes\n")
    said = {}
    for skills_as in ("skills", "both", "prompts"):
        settings = {"namespace": "x", "transport": "files", "path": str(tmp_path), "skills_as": skills_as}
        source = FilePromptSource(FilesUpstream.model_validate(settings), on_change=print)
        source._load()
        assert source.skills == {}
        said[skills_as] = source.notes
    first = "docx/SKILL.md, pdf/SKILL.md, pptx/SKILL.md and 2 more"
    assert said["skills"] == [f"{first}: not served: no skills layout holds them {LAYOUTS}"]
    assert said["both"] == [f"{first}: served as prompts only: no skills layout holds them {LAYOUTS}"]
    assert said["prompts"] == []  # skills are not asked for: nothing is missing


LAYOUTS = (
    "(.claude/skills/<name>/, a plugin's skills/<name>/, or path set to a .claude/skills folder; see docs/skills.md)"
)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("skills_as", "skill_edit", "command_edit"),
    [("skills", {"skills"}, {"prompts"}), ("both", {"prompts", "skills"}, {"prompts"})],
)
async def test_a_reread_says_which_lists_changed(
    tmp_path: Path, skills_as: str, skill_edit: set[str], command_edit: set[str]
) -> None:
    """A skill's file edited changes the skills, not the prompts (unless its SKILL.md serves as a prompt
    too); a command edited changes the prompts; a file no list shows changes no list. Every change used
    to be announced as every list's (a client re-listed its prompts for each skill file edited)."""
    from gateway.config.upstreams import FilesUpstream
    from gateway.sources.files.source import FilePromptSource

    folder = skill(tmp_path, ".claude/skills/deploy", front("deploy"))
    (tmp_path / ".claude/commands").mkdir()
    (tmp_path / ".claude/commands/fix.md").write_text("Fix it\n")
    (tmp_path / "notes.txt").write_text("not a prompt\n")
    told: list[tuple[str, frozenset[str]]] = []
    settings = {"namespace": "team", "transport": "files", "path": str(tmp_path), "skills_as": skills_as}
    source = FilePromptSource(FilesUpstream.model_validate(settings), on_change=lambda *change: told.append(change))
    source._load()
    (folder / "checklist.md").write_text("- [ ] tests\n")
    await source._reread("changed")
    (folder / "SKILL.md").write_bytes(front("deploy", "Deploy, carefully"))
    await source._reread("changed")
    (tmp_path / ".claude/commands/fix.md").write_text("Fix it now\n")
    await source._reread("changed")
    (tmp_path / "notes.txt").write_text("still not a prompt\n")
    await source._reread("changed")
    assert told == [
        ("team", frozenset({"skills"})),
        ("team", frozenset(skill_edit)),
        ("team", frozenset(command_edit)),
        ("team", frozenset()),
    ]


def test_a_skill_too_large_for_a_prompt_says_it_is_served_as_a_skill(tmp_path: Path) -> None:
    """A tester: under ``skills_as = "both"`` a SKILL.md over the prompt files' bound was said to be
    "broken", though it was served as a skill."""
    from gateway.config.upstreams import FilesUpstream
    from gateway.sources.files.source import FilePromptSource

    skill(tmp_path, ".claude/skills/big", front("big") + b"x" * 300_000)
    settings = {"namespace": "x", "transport": "files", "path": str(tmp_path), "skills_as": "both"}
    source = FilePromptSource(FilesUpstream.model_validate(settings), on_change=print)
    source._load()
    assert (sorted(source.prompts), sorted(source.skills)) == ([], ["big"])
    assert source.problems == {
        ".claude/skills/big/SKILL.md": ".claude/skills/big/SKILL.md: over 262144 bytes "
        "(not served as a prompt; served as a skill)"
    }


def test_front_matter_scalars_are_read_as_yaml_1_2_reads_them(tmp_path: Path) -> None:
    """Hosts compare the entry with SKILL.md read by a YAML 1.2 parser (the reference implementation's
    `yaml`; tests/interop compares with it): ``yes`` is text, ``010`` ten, ``1:20`` text, ``1e3`` a number."""
    lines = "enabled: yes\nmode: 010\noctal: 0o17\nbig: 1e3\ntime: 1:20\ngrouped: 1_000\nflags: 0b11\nday: 2024-01-02"
    skill(tmp_path, ".claude/skills/s", f"---\nname: s\ndescription: Scalars\n{lines}\n---\nBody\n".encode())
    meta = scan_skills(tmp_path, plugin=False).skills["s"].frontmatter
    assert {k: meta[k] for k in ("enabled", "mode", "octal", "big", "time", "grouped", "flags", "day")} == {
        "enabled": "yes",
        "mode": 10,
        "octal": 15,
        "big": 1000.0,
        "time": "1:20",
        "grouped": "1_000",
        "flags": "0b11",
        "day": "2024-01-02",
    }


@pytest.mark.parametrize("value", ["!!int 0b11", "!!float 1:20.5", "1" * 5000])
def test_a_scalar_no_reader_can_make_a_number_refuses_its_skill_not_the_gateway(tmp_path: Path, value: str) -> None:
    """A reviewer: YAML 1.1's forms under an explicit tag (and an integer past Python's 4300 digits)
    raised ValueError out of the scan, and the gateway stopped."""
    skill(tmp_path, ".claude/skills/odd", f"---\nname: odd\ndescription: Odd\nversion: {value}\n---\n".encode())
    skill(tmp_path, ".claude/skills/good", front("good"))
    scanned = scan_skills(tmp_path, plugin=False)
    assert sorted(scanned.skills) == ["good"]
    assert "its front matter is not valid YAML" in scanned.problems[".claude/skills/odd/SKILL.md"]


def test_a_file_named_skill_md_inside_a_served_skill_is_no_stray(tmp_path: Path) -> None:
    """A reviewer: a plugin skill's ``templates/SKILL.md`` (one of its files) was said to be a SKILL.md
    no skills layout holds."""
    creator = skill(tmp_path, "skills/creator", front("creator"))
    (creator / "templates").mkdir()
    (creator / "templates/SKILL.md").write_text("---\nname: x\ndescription: A template\n---\n")
    scanned = scan_skills(tmp_path, plugin=True)
    assert sorted(scanned.skills) == ["creator"]
    assert (scanned.outside, scanned.outside_count) == ([], 0)
    assert "templates/SKILL.md" in scanned.skills["creator"].files
