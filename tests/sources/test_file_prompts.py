"""Prompt files: the three kinds parse into prompts, render with their arguments, and a template can do
nothing but fill in text (Jinja's sandbox), whatever it says."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.sources.files.prompts import PromptFileError, RenderError, parse_prompt_file
from gateway.sources.files.source import scan

REVIEW = """---
title: Review code
description: Review a change for bugs first.
tags: [engineering, review]
arguments:
  - name: code
    description: The code to review
    required: true
  - name: language
    values: [python, rust, go]
    default: python
---
Review this {{ language }} code:

{{ code }}
<!-- assistant -->
I will list bugs first.
<!-- user -->
Thanks.
"""


def test_a_template_file_lists_and_renders_with_roles_defaults_and_allowed_values() -> None:
    prompt = parse_prompt_file("review.md", REVIEW)
    assert prompt.listed() == {
        "name": "review",
        "title": "Review code",
        "description": "Review a change for bugs first.",
        "arguments": [
            {"name": "code", "required": True, "description": "The code to review"},
            {"name": "language", "required": False},
        ],
        "_meta": {"prompt-gateway/tags": ["engineering", "review"]},
    }
    messages = prompt.render({"code": "x = 1"})
    assert [(m["role"], m["content"]["text"]) for m in messages] == [
        ("user", "Review this python code:\n\nx = 1"),
        ("assistant", "I will list bugs first."),
        ("user", "Thanks."),
    ]
    assert prompt.complete("language", "r") == ["rust"]
    with pytest.raises(RenderError, match="must be one of python, rust, go"):
        prompt.render({"code": "x", "language": "cobol"})
    with pytest.raises(RenderError, match="missing required argument 'code'"):
        prompt.render({})
    with pytest.raises(RenderError, match="unknown argument 'other'"):
        prompt.render({"code": "x", "other": "y"})


@pytest.mark.parametrize(
    ("body", "given", "text"),
    [
        ("Hello {{ name }}!", {}, "Hello !"),
        ("Hello{% if name %} {{ name }}{% endif %}!", {}, "Hello!"),
        ("Hello{% if name %} {{ name }}{% endif %}!", {"name": "Ada"}, "Hello Ada!"),
        ("Hello {{ name | default('you') }}!", {}, "Hello you!"),
        ("{{ 'named' if name is defined else 'left out' }}", {}, "left out"),
    ],
)
def test_an_optional_argument_left_out_renders_as_nothing(body: str, given: dict[str, str], text: str) -> None:
    """The listing calls it optional: leaving it out was refused with -32602 'UndefinedError: 'name' is
    undefined'. A variable the front matter does not name is still an error (a required argument)."""
    prompt = parse_prompt_file("hello.md", "---\narguments:\n  - name: name\n---\n" + body)
    assert prompt.listed()["arguments"] == [{"name": "name", "required": False}]
    assert prompt.render(given)[0]["content"]["text"] == text
    typo = parse_prompt_file("typo.md", "---\narguments:\n  - name: name\n---\n{{ nmae }}")
    assert [(a.name, a.required) for a in typo.arguments] == [("name", False), ("nmae", True)]
    with pytest.raises(RenderError, match="missing required argument 'nmae'"):
        typo.render({})


def test_claude_code_commands_and_vscode_prompt_files() -> None:
    """Positionals are 0-based since Claude Code's 2026 rules ($1 is the second word); VS Code files also
    take what follows the command (``arguments``), appended."""
    command = parse_prompt_file(
        ".claude/commands/fix-issue.md", "---\ndescription: Fix an issue\n---\nFix issue $ARGUMENTS now ($1)."
    )
    assert command.name == "fix-issue"
    assert [a.name for a in command.arguments] == ["arguments"]
    assert command.render({"arguments": "123 urgent"})[0]["content"]["text"] == "Fix issue 123 urgent now (urgent)."
    vscode = parse_prompt_file("docs/explain.prompt.md", "Explain ${input:topic:What to explain} to ${input:audience}.")
    assert vscode.name == "explain"
    assert [(a.name, a.required) for a in vscode.arguments] == [  # left out, an input passes through
        ("topic", False),
        ("audience", False),
        ("arguments", False),
    ]
    assert vscode.render({"topic": "TLS", "audience": "a child"})[0]["content"]["text"] == "Explain TLS to a child."


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("---\ntitle: [unclosed\n---\nbody", r"broken.md:[23]: front matter is not valid YAML"),
        ("---\n- a list\n---\nbody", "broken.md:2: front matter must be a mapping"),
        ("line one\nline two {% if %}\n", "broken.md:2: template syntax"),
        ("---\nname: a/b\n---\nx", "broken.md:1: name 'a/b' must be"),
        ("---\narguments: [{name: 'not an identifier'}]\n---\nx", "needs a name that is an identifier"),
    ],
)
def test_a_broken_file_is_named_with_its_line(text: str, problem: str) -> None:
    with pytest.raises(PromptFileError, match=problem):
        parse_prompt_file("broken.md", text)


ESCAPES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ self._TemplateReference__context }}",
    "{{ lipsum.__globals__['os'].system('id') }}",
    "{% for x in range(10**9) %}{% endfor %}",
    "{{ ().__class__.__base__.__subclasses__() }}",
    "{{ config.items() }}",
]


@pytest.mark.parametrize("template", ESCAPES)
def test_known_sandbox_escapes_are_refused(template: str) -> None:
    prompt = parse_prompt_file("evil.md", template)
    with pytest.raises(RenderError):
        prompt.render({})


@given(st.text(max_size=200))
def test_any_template_either_renders_text_or_is_refused(template: str) -> None:
    try:
        prompt = parse_prompt_file("any.md", template)
    except PromptFileError:
        return
    try:
        messages = prompt.render({})
    except RenderError:
        return
    assert all(isinstance(m["content"]["text"], str) for m in messages)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40))
def test_odd_file_names_never_escape_or_crash(name: str) -> None:
    try:
        prompt = parse_prompt_file(f"{name}.md", "hello")
    except PromptFileError:
        return
    assert "/" not in prompt.name  # a prompt name is never a path


def test_a_symbolic_link_out_of_the_directory_and_a_broken_file_leave_the_rest_served(tmp_path: Path) -> None:
    root = tmp_path / "prompts"
    (root / "team").mkdir(parents=True)
    (root / "team" / "hello.md").write_text("Hello {{ who | default('world') }}")
    (root / "broken.md").write_text("{% if %}")
    secret = tmp_path / "secret.md"
    secret.write_text("the secret")
    (root / "leak.md").symlink_to(secret)
    (root / "notes.txt").write_text("not a prompt")
    scanned = scan(root)
    prompts, problems = scanned.prompts, scanned.problems
    assert sorted(prompts) == ["hello"]
    assert problems["broken.md"].startswith("broken.md:1: template syntax")
    assert "outside the prompt directory" in problems["leak.md"]


def test_of_hidden_directories_only_claude_commands_are_read(tmp_path: Path) -> None:
    root = tmp_path / "prompts"
    for directory in (".claude/commands", ".claude/agents", ".git", "team"):
        (root / directory).mkdir(parents=True)
    (root / ".claude" / "commands" / "fix.md").write_text("Fix $ARGUMENTS")
    (root / ".claude" / "agents" / "reviewer.md").write_text("an agent definition, not a prompt")
    (root / ".claude" / "CLAUDE.md").write_text("project memory, not a prompt")
    (root / ".git" / "notes.md").write_text("not a prompt")
    (root / "team" / "hello.md").write_text("Hello")
    scanned = scan(root)
    prompts, problems = scanned.prompts, scanned.problems
    assert sorted(prompts) == ["fix", "hello"]
    assert problems == {}


def test_a_variable_the_front_matter_does_not_declare_is_a_required_argument() -> None:
    prompt = parse_prompt_file(
        "summarize.md", "Summarize {{ text }}{% for i in range(2) %}{{ i }}{% endfor %}{{ tone }}"
    )
    assert [(a["name"], a["required"]) for a in prompt.listed()["arguments"]] == [("text", True), ("tone", True)]
    declared = parse_prompt_file("s.md", "---\narguments: [{name: text, default: x}]\n---\n{{ text }} {{ more }}")
    assert [(a["name"], a["required"]) for a in declared.listed()["arguments"]] == [("text", False), ("more", True)]


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def test_images_and_resources_by_relative_path_become_messages_of_their_section(tmp_path: Path) -> None:
    (tmp_path / "guides" / "img").mkdir(parents=True)
    (tmp_path / "guides" / "img" / "flow.png").write_bytes(PNG)
    (tmp_path / "style.md").write_text("Short sentences.")
    (tmp_path / "guides" / "explain.md").write_text(
        "Explain {{ topic }}.\n<!-- image: img/flow.png -->\n"
        "<!-- assistant -->\nUsing:\n<!-- resource: ../style.md -->\n"
    )
    scanned = scan(tmp_path)
    prompts, problems = scanned.prompts, scanned.problems
    assert problems == {}
    messages = prompts["explain"].render({"topic": "<!-- image: img/flow.png -->"})  # an argument cannot attach
    assert [(m["role"], m["content"]["type"]) for m in messages] == [
        ("user", "text"),
        ("user", "image"),
        ("assistant", "text"),
        ("assistant", "resource"),
    ]
    assert messages[0]["content"]["text"] == "Explain <!-- image: img/flow.png -->."
    assert messages[1]["content"]["mimeType"] == "image/png"
    assert messages[3]["content"]["resource"] == {
        "uri": "prompt-file:style.md",
        "mimeType": "text/markdown",
        "text": "Short sentences.",
    }


@pytest.mark.parametrize(
    ("marker", "problem"),
    [
        ("<!-- image: ../../etc/passwd -->", "outside the prompt directory"),
        ("<!-- resource: /etc/passwd -->", "plain relative path"),
        ("<!-- resource: file:///etc/passwd -->", "plain relative path"),
        ("<!-- resource: a\\..\\..\\b -->", "plain relative path"),
        ("<!-- image: missing.png -->", "not a file in the prompt directory"),
        ("<!-- image: style.md -->", "not an image"),
        ("<!-- resource: out -->", "points outside the prompt directory"),
    ],
)
def test_an_attachment_that_is_not_a_file_in_the_directory_is_the_files_problem(
    tmp_path: Path, marker: str, problem: str
) -> None:
    root = tmp_path / "prompts"
    root.mkdir()
    (root / "style.md").write_text("text")
    (tmp_path / "secret.txt").write_text("secret")
    (root / "out").symlink_to(tmp_path / "secret.txt")
    (root / "p.md").write_text(f"Intro\n\n{marker}\n")
    scanned = scan(root)
    prompts, problems = scanned.prompts, scanned.problems
    assert "p" not in prompts
    assert problems["p.md"].startswith("p.md:3: ")
    assert problem in problems["p.md"]
    assert "style" in prompts  # the others serve


@given(st.text(st.sampled_from("ab./\\:%~\x00 "), min_size=1, max_size=20))
def test_no_attachment_path_leaves_the_directory(path: str) -> None:
    try:
        prompt = parse_prompt_file("dir/p.md", f"<!-- image: {path} -->")
    except PromptFileError:
        return
    for attachment in prompt.attachments:
        assert not attachment.path.startswith(("../", "/")), attachment.path
        assert attachment.path not in ("..", ".")


def test_what_a_directory_embeds_is_bounded_altogether_and_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gateway.sources.files.source

    monkeypatch.setattr(gateway.sources.files.source, "MAX_ATTACHED_BYTES", 100)
    (tmp_path / "one.txt").write_text("1" * 60)
    (tmp_path / "two.txt").write_text("2" * 60)
    (tmp_path / "a.md").write_text("<!-- resource: one.txt -->")
    (tmp_path / "b.md").write_text("<!-- resource: one.txt -->")  # the same file again: no more bytes
    (tmp_path / "c.md").write_text("<!-- resource: two.txt -->")
    scanned = scan(tmp_path)
    prompts, problems = scanned.prompts, scanned.problems
    assert sorted(prompts) == ["a", "b"]
    assert problems == {"c.md": "c.md:1: the directory's attachments would pass 100 bytes"}
