"""Prompts kept in files, served through the gateway to the official SDK client: listed, got, completed,
an edit announced as list_changed, and a broken file named by check while the others serve."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import mcp.types as t
import pytest
from mcp import Client, MCPError

from tests.integration.helpers import ROOT, ListChangedWatcher, gateway_command, gateway_params, write_config
from tests.schema_check import check

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REVIEW = """---
description: Review code, bugs first.
arguments:
  - name: code
    required: true
  - name: language
    values: [python, rust, go]
    default: python
---
Review this {{ language }} code:
{{ code }}
"""

AS_WRITTEN = "(budget $5,000; awk '{print $4}')"
"""Positional placeholders that receive no word: Claude Code leaves them as written, so the gateway does."""


def prompt_directory(root: Path) -> Path:
    (root / ".claude" / "commands").mkdir(parents=True)
    (root / "review.md").write_text(REVIEW)
    (root / ".claude" / "commands" / "fix-issue.md").write_text(f"Fix issue $ARGUMENTS {AS_WRITTEN}.")
    (root / "explain.prompt.md").write_text("Explain ${input:topic}.")
    return root


async def test_file_prompts_through_the_gateway(tmp_path: Path) -> None:
    root = prompt_directory(tmp_path / "prompts")
    config = write_config(tmp_path / "c.toml", [{"namespace": "team", "transport": "files", "path": str(root)}])
    changes = ListChangedWatcher()
    async with Client(gateway_params(config), mode="legacy", cache=None, message_handler=changes) as client:
        names = sorted(p.name for p in (await client.list_prompts()).prompts)
        assert names == ["team__explain", "team__fix-issue", "team__review"]
        review = await client.get_prompt("team__review", {"code": "x = 1"})
        assert review.messages[0].content == t.TextContent(type="text", text="Review this python code:\nx = 1")
        fix = await client.get_prompt("team__fix-issue", {"arguments": "42"})
        assert fix.messages[0].content == t.TextContent(type="text", text=f"Fix issue 42 {AS_WRITTEN}.")
        completion = await client.complete(
            t.PromptReference(type="ref/prompt", name="team__review"), {"name": "language", "value": "r"}
        )
        assert completion.completion.values == ["rust"]
        with pytest.raises(MCPError) as refused:
            await client.get_prompt("team__review", {"code": "x", "language": "cobol"})
        assert refused.value.error.code == -32602
        assert "must be one of python, rust, go" in refused.value.error.message
        await anyio.Path(root / "summarize.md").write_text("Summarize: {{ text }}")
        await changes.wait()
        names = sorted(p.name for p in (await client.list_prompts()).prompts)
        assert "team__summarize" in names


async def test_check_names_a_broken_file_and_the_others_serve(tmp_path: Path) -> None:
    root = prompt_directory(tmp_path / "prompts")
    await anyio.Path(root / "broken.md").write_text("fine line\n{% for %}\n")
    config = write_config(
        tmp_path / "c.toml", [{"namespace": "team", "transport": "files", "path": str(root), "watch": False}]
    )
    result = await anyio.run_process(gateway_command(config, "check"), cwd=ROOT, check=False)
    assert result.returncode == 1  # something is broken, though the rest serves
    output = result.stdout.decode()
    row = next(line for line in output.splitlines() if line.startswith("team "))
    assert row.split()[1:4] == ["files", "ready", "3"]
    assert "1 broken files" in row
    # each problem on a line of its own (a directory's problems were one line of thousands of characters)
    assert any(line.startswith("team: broken: broken.md:2: template syntax") for line in output.splitlines())


SHIFTED = """---
argument-hint: [pr-number] [priority] [assignee]
description: Review pull request
---
Review PR #$1 with priority $2 and assign to $3.
"""
"""An often copied example, written for 1-based ``$N``: Claude Code 2.1 counts from 0."""


async def test_check_warns_of_a_hint_whose_first_word_the_body_drops(tmp_path: Path) -> None:
    root = prompt_directory(tmp_path / "prompts")
    await anyio.Path(root / ".claude" / "commands" / "review-pr.md").write_text(SHIFTED)
    await anyio.Path(root / ".claude" / "commands" / "counted.md").write_text(
        SHIFTED.replace("$1", "$0").replace("$2", "$1").replace("$3", "$2")
    )
    config = write_config(
        tmp_path / "c.toml", [{"namespace": "team", "transport": "files", "path": str(root), "watch": False}]
    )
    result = await anyio.run_process(gateway_command(config, "check"), cwd=ROOT, check=False)
    assert result.returncode == 0  # served as Claude Code serves it: a warning, not a broken file
    notes = [line for line in result.stdout.decode().splitlines() if "argument-hint" in line]
    assert notes == [
        "team: note: .claude/commands/review-pr.md: front matter is not valid YAML (line 2: expected <block end>, "
        "but found '['): read line by line; argument-hint '[pr-number] [priority] [assignee]' has 3 "
        "bracketed parts but the body never uses $0 (it uses $1 $2 $3): $N counts from 0 ($0 is the first word "
        "typed), so that word is dropped"
    ]


async def test_a_slow_template_fails_its_own_request_and_stalls_nobody(tmp_path: Path) -> None:
    root = prompt_directory(tmp_path / "prompts")
    slow = "{% for a in range(99999) %}{% for b in range(99999) %}{% endfor %}{% endfor %}done"
    await anyio.Path(root / "slow.md").write_text(slow)
    config = write_config(tmp_path / "c.toml", [{"namespace": "team", "transport": "files", "path": str(root)}])
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        async with anyio.create_task_group() as tg:
            refused: list[MCPError] = []

            async def slow_get() -> None:
                with pytest.raises(MCPError) as info:
                    await client.get_prompt("team__slow")
                refused.append(info.value)

            tg.start_soon(slow_get)
            review = await client.get_prompt("team__review", {"code": "y = 2"})  # served meanwhile
            assert review.messages
        assert "took longer than 2 s to render" in refused[0].error.message


async def test_list_filters_by_tag(tmp_path: Path) -> None:
    root = tmp_path / "prompts"
    root.mkdir()
    await anyio.Path(root / "a.md").write_text("---\ntags: [writing, team]\n---\nA")
    await anyio.Path(root / "b.md").write_text("---\ntags: [writing]\n---\nB")
    await anyio.Path(root / "c.md").write_text("C")
    config = write_config(
        tmp_path / "c.toml", [{"namespace": "t", "transport": "files", "path": str(root), "watch": False}]
    )
    command = [*gateway_command(config, "list"), "--json", "--tag", "writing"]
    writing = json.loads((await anyio.run_process(command, cwd=ROOT)).stdout)
    assert [p["name"] for p in writing] == ["t__a", "t__b"]
    assert writing[0]["_meta"]["prompt-gateway/tags"] == ["writing", "team"]
    both = json.loads((await anyio.run_process([*command, "--tag", "team"], cwd=ROOT)).stdout)
    assert [p["name"] for p in both] == ["t__a"]


async def test_render_prints_a_prompts_messages(tmp_path: Path) -> None:
    root = prompt_directory(tmp_path / "prompts")
    config = write_config(
        tmp_path / "c.toml", [{"namespace": "team", "transport": "files", "path": str(root), "watch": False}]
    )
    render = [*gateway_command(config, "render"), "team__review", "--arg", "code=x = 1", "--arg", "language=go"]
    shown = await anyio.run_process(render, cwd=ROOT)
    assert shown.stdout.decode() == "── user ──\nReview this go code:\nx = 1\n\n"
    as_json = json.loads((await anyio.run_process([*render, "--json"], cwd=ROOT)).stdout)
    assert as_json["messages"][0]["content"]["text"] == "Review this go code:\nx = 1"
    refused = await anyio.run_process([*render[:-2], "--arg", "language=cobol"], cwd=ROOT, check=False)
    assert refused.returncode == 1
    assert "must be one of python, rust, go" in refused.stderr.decode()


async def test_a_prompt_file_embeds_an_image_and_a_text_file(tmp_path: Path) -> None:
    root = tmp_path / "prompts"
    (root / "img").mkdir(parents=True)
    (root / "img" / "dot.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 8)
    (root / "style.md").write_text("Use short sentences.")
    (root / "draw.md").write_text(
        "Describe {{ what }}:\n<!-- image: img/dot.png -->\nFollow:\n<!-- resource: style.md -->\n"
    )
    config = write_config(tmp_path / "c.toml", [{"namespace": "team", "transport": "files", "path": str(root)}])
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        got = await client.get_prompt("team__draw", {"what": "the dot"})
    check("2025-11-25", "GetPromptResult", got.model_dump(by_alias=True, exclude_none=True, mode="json"))
    kinds = [type(m.content) for m in got.messages]
    assert kinds == [t.TextContent, t.ImageContent, t.TextContent, t.EmbeddedResource]
    image, resource = got.messages[1].content, got.messages[3].content
    assert isinstance(image, t.ImageContent)
    assert image.mime_type == "image/png"
    assert isinstance(resource, t.EmbeddedResource)
    assert isinstance(resource.resource, t.TextResourceContents)
    assert resource.resource.text == "Use short sentences."


async def test_check_waits_for_a_large_directory_however_long_its_scan_takes(tmp_path: Path) -> None:
    """1,500 templates take a couple of seconds to read here: check (and list, render) gave up after one
    and showed 0 prompts."""
    root = tmp_path / "many"
    root.mkdir()
    template = (
        "---\ndescription: Prompt {i}\narguments:\n  - name: code\n    required: true\n---\n"
        "{{% for line in code.splitlines() %}}{{{{ loop.index }}}}: {{{{ line }}}}\n{{% endfor %}}\n"
        "Review {{{{ code }}}} in {{{{ language | default('python') }}}}.\n"
    )
    for i in range(1500):
        (root / f"p{i:04}.md").write_text(template.format(i=i))
    config = write_config(tmp_path / "c.toml", [{"namespace": "many", "transport": "files", "path": str(root)}])
    result = await anyio.run_process(gateway_command(config, "check"), cwd=ROOT, check=False)
    row = next(line for line in result.stdout.decode().splitlines() if line.startswith("many "))
    assert row.split()[1:4] == ["files", "ready", "1500"], row
    assert result.returncode == 0
