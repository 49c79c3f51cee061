"""Claude Code and VS Code prompt files read by their tools' own rules, on a corpus in our own words of
every form seen in real collections (namespaced folders, colons and spaces in names, hints that are not
YAML, GitHub Actions expressions, skills, plugins, editor variables). Values reach the model unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.sources.files.common import valid_name
from gateway.sources.files.prompts import FilePrompt, PromptFileError, parse_prompt_file
from gateway.sources.files.source import scan


def text(prompt: FilePrompt, **values: str) -> str:
    rendered = prompt.render(values)
    assert len(rendered) == 1
    return str(rendered[0]["content"]["text"])


def command(body: str, path: str = ".claude/commands/c.md") -> FilePrompt:
    return parse_prompt_file(path, body)


@pytest.mark.parametrize(
    ("body", "typed", "expected"),
    [
        ("Fix $ARGUMENTS.", "issue 42", "Fix issue 42."),
        ("First $0, second $1, third $2.", "a b", "First a, second b, third $2."),  # 0-based; no word: as written
        ("Budget $5,000 for $ARGUMENTS", "the launch", "Budget $5,000 for the launch"),  # a price
        ("Plans from $100 a month: compare $0 and $1", "basic pro", "Plans from $100 a month: compare basic and pro"),
        ("Fourth column of $0: awk '{print $4}' $0", "log.tsv", "Fourth column of log.tsv: awk '{print $4}' log.tsv"),
        (
            "Explain $ARGUMENTS: `UPDATE stock SET qty = $2 WHERE sku = $3`",
            "this",
            "Explain this: `UPDATE stock SET qty = $2 WHERE sku = $3`",
        ),  # SQL parameters
        ("Tag $ARGUMENTS[0], then $ARGUMENTS[2]", "v1 v2", "Tag v1, then $ARGUMENTS[2]"),
        ("Costs $5,000.", "extra", "Costs $5,000.\n\nARGUMENTS: extra"),  # no word received: appended
        ("Costs $5,000.", "", "Costs $5,000."),
        ("PR $ARGUMENTS[0] at $ARGUMENTS[1]", 'one "two words"', "PR one at two words"),  # shell-style words
        ("Quote $0", "it's broken", "Quote it's"),  # an unbalanced quote: plain whitespace split
        ("No placeholder here.", "extra text", "No placeholder here.\n\nARGUMENTS: extra text"),
        ("No placeholder here.", "", "No placeholder here."),
        (r"Literal \$ARGUMENTS and \$0, then $0", "x", "Literal $ARGUMENTS and $0, then x"),
        # Claude Code 2.1.332's own rules, checked against its published build's substitution:
        ("Pay $1abc, $2_x and $0", "a b c", "Pay $1abc, $2_x and a"),  # $N followed by a word character is text
        (r"Escaped \$1abc", "x", "Escaped $1abc\n\nARGUMENTS: x"),  # the backslash goes before any digit
        (r"Doubled \\$ARGUMENTS", "x", r"Doubled \\x"),  # a doubled backslash escapes nothing
        (r"Not a placeholder: \$, \$x, \ARGUMENTS", "", r"Not a placeholder: \$, \$x, \ARGUMENTS"),
        (
            "Deploy ${{ github.sha }} with !`git status` and @src/a.py",
            "",
            "Deploy ${{ github.sha }} with !`git status` and @src/a.py",
        ),
        (
            "Session ${CLAUDE_SESSION_ID} in ${CLAUDE_SKILL_DIR}: $ARGUMENTS",
            "go",
            "Session ${CLAUDE_SESSION_ID} in ${CLAUDE_SKILL_DIR}: go",
        ),
        (
            "{% if x %}Jinja is not Claude Code's{% endif %} {{ y }} $0",
            "z",
            "{% if x %}Jinja is not Claude Code's{% endif %} {{ y }} z",
        ),
    ],
)
def test_claude_code_substitutions(body: str, typed: str, expected: str) -> None:
    prompt = command(body)
    assert [a.name for a in prompt.arguments] == ["arguments"]
    assert text(prompt, arguments=typed) == expected


def test_values_are_substituted_once() -> None:
    """``render --arg 'arguments=the price is $5 and awk $1 breaks'`` gave ``the price is and and awk the breaks``."""
    typed = "the price is $5 and awk $1 breaks"
    assert text(command("Say: $ARGUMENTS"), arguments=typed) == f"Say: {typed}"
    assert text(command("First word: $0; all: $ARGUMENTS"), arguments=typed) == f"First word: the; all: {typed}"


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_a_persons_text_reaches_the_model_unchanged(typed: str) -> None:
    assert text(command("<<$ARGUMENTS>>"), arguments=typed) == f"<<{typed}>>".strip()
    vscode = parse_prompt_file("p.prompt.md", "<<${input:what}>>")
    assert text(vscode, what=typed) == f"<<{typed}>>".strip()


def test_named_arguments_from_the_front_matter() -> None:
    prompt = command(
        "---\narguments: component source target\nargument-hint: [name] [from] [to]\n---\n"
        "Move $component from $source to $target ($ARGUMENTS; first $0; $targets stays)"
    )
    assert [(a.name, a.description) for a in prompt.arguments] == [
        ("component", "name"),
        ("source", "from"),
        ("target", "to"),
    ]
    rendered = text(prompt, component="Search Bar", source="React", target="Vue")
    assert rendered == "Move Search Bar from React to Vue ('Search Bar' React Vue; first Search Bar; $targets stays)"
    listed = command("---\narguments: [a, b]\n---\n$a/$b")
    assert text(listed, a="1") == "1/"
    # as in Claude Code: a name followed by "[" is not the argument, and an escaped one is its text
    indexed = command("---\narguments: [a]\n---\n$a[0] \\$a $a")
    assert text(indexed, a="v") == "$a[0] $a v"


@pytest.mark.parametrize(
    ("front", "description", "hint"),
    [
        ("argument-hint: [message]", "Commit the work.", "[message]"),  # a YAML list: Claude Code's own example
        ("argument-hint: [pr-number] [priority] [assignee]", "Commit the work.", "[pr-number] [priority] [assignee]"),
        (
            "description: Review: the whole diff\nargument-hint: <files>",
            "Review: the whole diff",
            "<files>",
        ),  # not YAML
        ("description: [unclosed", "[unclosed", None),  # broken: read line by line, never refused
    ],
)
def test_front_matter_is_read_as_claude_code_reads_it(front: str, description: str, hint: str | None) -> None:
    prompt = command(f"---\n{front}\n---\n# Commit the work.\n\nThen push.")
    assert prompt.description == description
    assert prompt.arguments[0].description == (hint or "what follows the command, as you would type it")


def test_front_matter_that_is_not_yaml_keeps_the_lines_that_are() -> None:
    """Claude Code's own ``argument-hint: [a] [b]`` is no YAML: the ``arguments: [a, b]`` beside it was lost."""
    prompt = command("---\narguments: [a, b]\nargument-hint: [a] [b]\n---\nA=$a B=$b")
    assert [(a.name, a.description) for a in prompt.arguments] == [("a", "a"), ("b", "b")]
    assert text(prompt, a="one", b="two") == "A=one B=two"


def test_a_command_offered_to_no_one_is_left_out_and_said(tmp_path: Path) -> None:
    write(tmp_path, ".claude/commands/internal.md", "---\nuser-invocable: false\n---\nOnly for the model.")
    write(tmp_path, ".claude/commands/public.md", "For people.")
    scanned = scan(tmp_path)
    assert sorted(scanned.prompts) == ["public"]
    assert any("user-invocable: false" in note for note in scanned.notes)


def test_a_command_read_as_a_template_says_what_to_set(tmp_path: Path) -> None:
    write(tmp_path, "commands/fix.md", "Fix {{ broken $ARGUMENTS")
    assert 'format = "claude-code"' in scan(tmp_path).problems["commands/fix.md"]


def test_commands_that_parse_as_templates_are_said_too(tmp_path: Path) -> None:
    """A tester's clone of a commands collection (no ``.claude/commands``): the 9 files Jinja could not
    parse said what to set, the 50 it could were served with ``$ARGUMENTS`` as written, unsaid."""
    for name in ("a", "b", "c", "d"):
        write(tmp_path, f"tools/{name}.md", f"Review $ARGUMENTS for {name}")
    write(tmp_path, "plain.md", "Hello {{ who }}")
    scanned = scan(tmp_path)
    assert sorted(scanned.prompts) == ["a", "b", "c", "d", "plain"]
    assert scanned.notes == [
        "tools/a.md, tools/b.md, tools/c.md and 1 more: use $ARGUMENTS, which a template serves as written "
        '(Claude Code commands? set format = "claude-code" on this upstream: docs/catalog.md)'
    ]


def test_a_templates_file_name_is_made_into_a_prompt_name(tmp_path: Path) -> None:
    """A tester's ``résumé ✨.md`` was refused, where a VS Code file's ``Résumé Builder`` is made a name."""
    prompt = parse_prompt_file("t/résumé ✨.md", "Write one for {{ who }}")
    assert prompt.name == "resume"
    assert prompt.note == "t/résumé ✨.md: its name 'résumé ✨' is served as 'resume'"
    with pytest.raises(PromptFileError, match="name 'résumé ✨' must be"):  # one written in it is the author's
        parse_prompt_file("t/r.md", "---\nname: résumé ✨\n---\nWrite one")
    for valid in ("code--review", "draft-", ".hidden-ish"):  # a reviewer: names that were valid kept theirs
        assert parse_prompt_file(f"t/{valid}.md", "Hi").name == valid
    with pytest.raises(PromptFileError, match="front matter is not valid YAML"):  # it raised ValueError
        parse_prompt_file("t/big.md", "---\nversion: " + "1" * 5000 + "\n---\nHi")


def test_a_command_without_description_is_described_by_its_first_line() -> None:
    assert command("\n\n## Refactor the module\nKeep behaviour.").description == "Refactor the module"


@pytest.mark.parametrize(
    ("wanted", "served"),
    [
        ("Apple App Store Reviewer", "Apple-App-Store-Reviewer"),
        ("svelte:a11y", "svelte-a11y"),
        ("Python - Production Code", "Python-Production-Code"),
        (".NET Upgrade", "NET-Upgrade"),
        ("{{SKILL_NAME}}", "SKILL_NAME"),
        ("Ünïcödé näme", "Unicode-name"),
        ("???", "prompt"),
    ],
)
def test_names_that_are_not_prompt_names_are_made_into_one(wanted: str, served: str) -> None:
    assert valid_name(wanted) == served
    prompt = parse_prompt_file(".github/prompts/x.prompt.md", f"---\nname: {wanted!r}\n---\nbody")
    assert prompt.name == served
    assert prompt.note is not None
    assert served in prompt.note


@pytest.mark.parametrize(
    ("hint", "body", "dropped"),
    [
        ("[pr] [priority] [assignee]", "PR $1, priority $2, to $3.", "$0"),
        ("[pr] [priority]", "PR $0.", "$1"),
        ("[file]", "Look at $1.", None),  # $1 receives no word, so what is typed is appended: not lost
        ("[pr] [priority]", "PR $0, priority $1.", None),
        ("[pr] [priority]", "PR $1, all of it: $ARGUMENTS", None),  # nothing typed is lost
        ("[amount]", "Budget: $5,000.", None),  # no word reaches a placeholder: all of it is appended
        ("[pr]", "PR \\$1 and $0", None),  # an escaped placeholder is text
        ("what to fix", "Fix $1", None),  # a hint that is no list of words
    ],
)
def test_a_hint_whose_words_the_body_drops_is_said(hint: str, body: str, dropped: str | None) -> None:
    prompt = parse_prompt_file(".claude/commands/c.md", f"---\nargument-hint: {hint}\n---\n{body}")
    said = [part for part in (prompt.note or "").split("; ") if "argument-hint" in part]
    if dropped is None:
        assert said == []
    else:
        assert len(said) == 1
        assert f"the body never uses {dropped} " in said[0]


def test_vscode_inputs_and_editor_variables() -> None:
    prompt = parse_prompt_file(
        ".github/prompts/explain.prompt.md",
        "---\ndescription: Explain code\nargument-hint: what to focus on\nmode: agent\ntools: ['codebase']\n---\n"
        "Explain ${selection} from ${file} for ${input:audience:Who reads it} "
        "in ${input:tone:Tone (optional)}; see #file:README.md and ${unknownVariable}.",
    )
    listed = {a.name: (a.required, a.description) for a in prompt.arguments}
    assert listed == {
        "selection": (False, "the text selected in the editor"),
        "file": (False, "the path of the file open in the editor"),
        "audience": (False, "Who reads it"),  # VS Code leaves an input left out to the model: none is required
        "tone": (False, "Tone (optional)"),
        "arguments": (False, "what to focus on"),
    }
    assert text(prompt, selection="x = 1", audience="juniors", arguments="be brief") == (
        "Explain x = 1 from ${file} for juniors in ${input:tone:Tone (optional)}; "
        "see #file:README.md and ${unknownVariable}.\n\nbe brief"
    )


def write(root: Path, relative: str, content: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)


def test_a_repository_with_the_tools_folders_is_served_whole(tmp_path: Path) -> None:
    """As collections are installed: a project's .claude/commands/ (folders are namespaces), skills,
    .github/prompts/; two commands of one name in two folders both served."""
    write(tmp_path, ".claude/commands/frontend/component.md", "Build the component $ARGUMENTS.\nUse ${{ github.sha }}.")
    write(tmp_path, ".claude/commands/backend/component.md", "---\ndescription: A backend component\n---\n$ARGUMENTS")
    write(tmp_path, ".claude/commands/svelte/svelte:a11y.md", "---\nargument-hint: [file]\n---\nAudit $0")
    write(tmp_path, ".claude/commands/broken.md", "---\ndescription: a: b: c\n  - nope\n---\nStill served.")
    write(tmp_path, ".claude/skills/release/SKILL.md", "---\nname: ship-it\ndescription: Ship\n---\nShip $ARGUMENTS")
    write(tmp_path, ".claude/skills/release/reference.md", "Not a prompt: a skill's supporting file.")
    write(tmp_path, ".claude/settings.md", "Not in a tool's folder.")
    write(tmp_path, ".github/prompts/review.prompt.md", "Review ${input:pr}")
    write(tmp_path, ".github/workflows/notes.md", "Not in a tool's folder.")
    write(tmp_path, "team/hello.md", "Hello {{ who }}")  # our own format, beside them
    scanned = scan(tmp_path)
    assert scanned.problems == {}
    served = ["broken", "component", "frontend-component", "hello", "review", "ship-it", "svelte-a11y"]
    assert sorted(scanned.prompts) == served
    assert scanned.prompts["component"].source == ".claude/commands/backend/component.md"  # first in order keeps it
    assert scanned.prompts["frontend-component"].description == "Build the component $ARGUMENTS."
    assert scanned.prompts["broken"].description == "a: b: c"  # not YAML: read line by line
    assert {p.kind for n, p in scanned.prompts.items() if n != "hello"} <= {"claude-command", "vscode-prompt"}
    assert scanned.prompts["hello"].kind == "template"
    assert any("served as 'frontend-component'" in note for note in scanned.notes)


def test_a_directory_inside_claude_commands_and_a_plugin_are_claude_codes(tmp_path: Path) -> None:
    home_commands = tmp_path / "home" / ".claude" / "commands"
    write(home_commands, "tools/refactor.md", "Refactor {{ not jinja }} $ARGUMENTS")
    scanned = scan(home_commands)
    assert [(p.name, p.kind) for p in scanned.prompts.values()] == [("refactor", "claude-command")]
    plugin = tmp_path / "plugin"
    write(plugin, ".claude-plugin/plugin.json", '{"name": "p"}')
    write(plugin, "commands/plan.md", "---\nname: p:plan\n---\nPlan $ARGUMENTS")
    write(plugin, "skills/tidy/SKILL.md", "Tidy up")
    write(plugin, "README.md", "Not a prompt in a plugin")
    scanned = scan(plugin)
    assert sorted(scanned.prompts) == ["p-plan", "tidy"]
    assert scan(home_commands, "template").prompts["refactor"].kind == "template"  # said otherwise: obeyed


def test_a_folder_named_like_a_tools_folder_among_commands_is_a_namespace(tmp_path: Path) -> None:
    """``skills/README.md`` beside a top-level ``README.md`` was served as ``README-2``: every folder called
    ``skills`` (or ``commands``, ``prompts``) was taken for one where the tools keep their files."""
    write(tmp_path, ".claude/commands/README.md", "About these commands.")
    write(tmp_path, ".claude/commands/skills/README.md", "About the commands on skills.")
    write(tmp_path, ".claude/commands/prompts/README.md", "About the commands on prompts.")
    write(tmp_path, ".claude/skills/README/SKILL.md", "A skill of that name too.")
    repository = scan(tmp_path)
    assert sorted(repository.prompts) == ["README", "README-2", "prompts-README", "skills-README"]
    assert repository.prompts["README-2"].source == ".claude/skills/README/SKILL.md"  # no folder of its own to add
    commands = scan(tmp_path / ".claude" / "commands")
    assert sorted(commands.prompts) == ["README", "prompts-README", "skills-README"]


@pytest.mark.parametrize(
    "path",
    ["t/greet.md", ".claude/commands/greet.md", ".github/prompts/greet.prompt.md", ".claude/skills/greet/SKILL.md"],
)
def test_a_byte_order_mark_before_the_front_matter_is_not_text(path: str) -> None:
    """A tester: Windows editors save UTF-8 with a BOM. The gateway's own template format then read no
    front matter, served no description, and sent the BOM and the front matter to the model."""
    prompt = parse_prompt_file(path, "\ufeff---\nname: greet\ndescription: Greets someone\n---\nHello there\n")
    assert prompt.description == "Greets someone"
    assert text(prompt).rstrip("\n") == "Hello there"
