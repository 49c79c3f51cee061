"""The official conformance suite, the TypeScript SDK's Inspector CLI and server-everything, for real."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as t
import pytest
from mcp import Client

from tests.integration.helpers import demo_upstream, gateway_params, running_gateway, write_config
from tests.interop.conftest import MODULES, ROOT

pytestmark = pytest.mark.anyio
HTTP = {"transport": "http", "port": 0}
PROMPTS_AND_SECURITY = (
    "completion-complete",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
)
PROMPT_SCENARIOS = (
    *PROMPTS_AND_SECURITY,
    "server-initialize",
    "server-session-lifecycle",
    "ping",
    "server-sse-multiple-streams",
)
PROMPT_SCENARIOS_2026 = (
    *PROMPTS_AND_SECURITY,
    "server-stateless",
    "caching",
    "sep-2164-resource-not-found",
    "input-required-result-non-tool-request",
    "input-required-result-missing-input-response",
    "input-required-result-unsupported-methods",
    "input-required-result-ignore-extra-params",
    "input-required-result-validate-input",
)


def conformance_upstream() -> dict[str, Any]:
    return {
        "namespace": "conformance",
        "prefix": False,
        "command": sys.executable,
        "args": ["-m", "tests.servers.conformance_prompts"],
        "cwd": str(ROOT),
    }


async def run(*command: str, timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
    with anyio.fail_after(timeout):
        return await anyio.run_process(list(command), cwd=ROOT / "interop", check=False)


async def conformance(node: str, url: str, *arguments: str) -> tuple[int, str]:
    """The official conformance suite's ``server`` command against ``url``: its exit code and its output
    (both streams, colours taken out)."""
    result = await run(node, str(MODULES / "conformance" / "dist" / "index.js"), "server", "--url", url, *arguments)
    return result.returncode, re.sub(r"\x1b\[[0-9;]*m", "", result.stdout.decode() + result.stderr.decode())


async def test_official_conformance_suite_handshake_revisions(node: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.toml", [conformance_upstream()], server=HTTP)
    async with running_gateway(config) as gw:
        returncode, output = await conformance(
            node, f"{gw.url}/mcp", "--spec-version", "2025-11-25", "--expected-failures", "conformance-baseline.yml"
        )
    assert returncode == 0, output[-4000:]
    for scenario in PROMPT_SCENARIOS:
        assert re.search(rf"{scenario}: [1-9]\d* passed, 0 failed", output), f"{scenario} did not pass"


async def test_official_conformance_suite_2026_07_28(node: str, tmp_path: Path) -> None:
    """Everything 2026-07-28 requires of a server, check by check: a failing check must be one that
    cannot apply to a prompts-only gateway (listed with its reason), and every prompts, completion,
    stateless-protocol, caching and multi round-trip check of a prompt must pass."""
    config = write_config(tmp_path / "c.toml", [conformance_upstream()], server=HTTP)
    results = tmp_path / "results"
    async with running_gateway(config) as gw:
        await conformance(node, f"{gw.url}/mcp", "--requirements", "2026-07-28", "--output-dir", str(results))
    not_applicable = yaml_lists(ROOT / "interop" / "conformance-2026-not-applicable.yml")
    passed: set[str] = set()
    failed: list[str] = []
    for checks in results.glob("*/checks.json"):
        scenario = re.sub(r"^server-|-\d{4}-\d{2}-\d{2}T.*$", "", checks.parent.name)
        for check in json.loads(checks.read_text()):
            if check["status"] == "SUCCESS":
                passed.add(scenario)
            elif check["status"] == "FAILURE" and not (
                scenario in not_applicable["scenarios"] or check["id"] in not_applicable["checks"]
            ):
                failed.append(f"{scenario}/{check['id']}: {check.get('errorMessage')}")
    assert not failed, "\n".join(failed)
    assert set(PROMPT_SCENARIOS_2026) <= passed, set(PROMPT_SCENARIOS_2026) - passed


def yaml_lists(path: Path) -> dict[str, set[str]]:
    """The two lists of a not-applicable file (``key:`` then ``  - item  # reason`` lines)."""
    lists: dict[str, set[str]] = {}
    current = ""
    for line in path.read_text().splitlines():
        item = line.split("#", 1)[0].rstrip()
        if item.endswith(":") and not item.startswith(" "):
            current = item[:-1]
            lists[current] = set()
        elif item.strip().startswith("- "):
            lists[current].add(item.strip()[2:].strip())
    return lists


def inspector(node: str, *args: str) -> list[str]:
    launcher = MODULES / "inspector" / "clients" / "launcher" / "build" / "index.js"
    return [node, str(launcher), "--cli", "--format", "json", "-q", *args]


async def inspect(node: str, target: list[str], *args: str) -> Any:
    separator = [] if target[:1] == ["--config"] else ["--"]
    result = await run(*inspector(node, *args, *separator, *target), timeout=120)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return json.loads(result.stdout)["result"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_inspector_cli_lists_and_gets(node: str, tmp_path: Path, transport: str) -> None:
    upstreams = [demo_upstream("writing", "writing"), conformance_upstream()]
    if transport == "stdio":
        config = write_config(tmp_path / "c.toml", upstreams)
        target = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--log-level", "warning"]
        await check_inspector(node, target)
    else:
        config = write_config(tmp_path / "c.toml", upstreams, server=HTTP)
        async with running_gateway(config) as gw:
            await check_inspector(node, [f"{gw.url}/mcp"])


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_inspector_cli_in_the_2026_07_28_era(node: str, tmp_path: Path, transport: str) -> None:
    """The Inspector pinned to 2026-07-28 (``protocolEra: modern``: no handshake, no fallback)."""
    upstreams = [demo_upstream("writing", "writing"), conformance_upstream()]
    servers = tmp_path / "inspector.json"
    if transport == "stdio":
        config = write_config(tmp_path / "c.toml", upstreams)
        command = ["-m", "gateway", "serve", "--config", str(config), "--log-level", "warning"]
        entry: dict[str, Any] = {"command": sys.executable, "args": command, "protocolEra": "modern"}
        servers.write_text(json.dumps({"mcpServers": {"gateway": entry}}))
        await check_inspector(node, ["--config", str(servers), "--server", "gateway"], modern=True)
        return
    config = write_config(tmp_path / "c.toml", upstreams, server=HTTP)
    async with running_gateway(config) as gw:
        entry = {"type": "streamable-http", "url": f"{gw.url}/mcp", "protocolEra": "modern"}
        servers.write_text(json.dumps({"mcpServers": {"gateway": entry}}))
        await check_inspector(node, ["--config", str(servers), "--server", "gateway"], modern=True)


async def inspected_prompt(node: str, target: list[str], name: str, *arguments: str) -> t.GetPromptResult:
    """``prompts/get`` by the Inspector CLI, ``arguments`` as ``key=value``."""
    args = ["--prompt-args", *arguments] if arguments else []
    return t.GetPromptResult.model_validate(
        await inspect(node, target, "--method", "prompts/get", "--prompt-name", name, *args)
    )


async def check_inspector(node: str, target: list[str], *, modern: bool = False) -> None:
    listing = t.ListPromptsResult.model_validate(await inspect(node, target, "--method", "prompts/list"))
    names = [p.name for p in listing.prompts]
    assert names[:3] == ["writing__summarize", "writing__translate", "writing__proofread"]
    assert "test_prompt_with_image" in names
    got = await inspected_prompt(node, target, "writing__translate", "text=hello", "language=German")
    assert isinstance(got.messages[0].content, t.TextContent)
    assert "into German" in got.messages[0].content.text
    raw = await inspect(node, target, "--method", "prompts/get", "--prompt-name", "test_prompt_with_image")
    image = t.GetPromptResult.model_validate(raw)
    assert isinstance(image.messages[0].content, t.ImageContent)
    # The era shows in the result: only 2026-07-28 results name the server in _meta.
    assert ("io.modelcontextprotocol/serverInfo" in raw.get("_meta", {})) == modern, raw.get("_meta")


def everything_upstream(node: str, transport: str, url: str | None = None) -> dict[str, Any]:
    if transport == "stdio":
        script = str(MODULES / "server-everything" / "dist" / "index.js")
        return {"namespace": "everything", "command": node, "args": [script, "stdio"]}
    return {"namespace": "everything", "transport": "streamable-http", "url": url}


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
async def test_server_everything_behind_the_gateway(node: str, tmp_path: Path, transport: str) -> None:
    if transport == "stdio":
        await check_everything(write_config(tmp_path / "c.toml", [everything_upstream(node, "stdio")]))
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = str(MODULES / "server-everything" / "dist" / "index.js")
    async with await anyio.open_process(
        [node, script, "streamableHttp"], env={"PORT": str(port), "PATH": ""}, cwd=ROOT / "interop"
    ) as server:
        assert server.stderr is not None
        lines = b""
        with anyio.fail_after(30):
            while str(port).encode() not in lines:
                lines += await server.stderr.receive()
        try:
            config = write_config(
                tmp_path / "c.toml", [everything_upstream(node, "http", f"http://127.0.0.1:{port}/mcp")]
            )
            await check_everything(config)
        finally:
            server.terminate()


async def check_everything(config: Path) -> None:
    async with Client(gateway_params(config), mode="legacy", cache=None) as client:
        names = {p.name for p in (await client.list_prompts()).prompts}
        assert {
            "everything__simple-prompt",
            "everything__args-prompt",
            "everything__resource-prompt",
            "everything__completable-prompt",
        } <= names
        args = await client.get_prompt("everything__args-prompt", {"city": "Paris"})
        assert "Paris" in json.dumps(args.model_dump(mode="json"))
        resource = await client.get_prompt("everything__resource-prompt", {"resourceType": "Text", "resourceId": "1"})
        assert [type(m.content) for m in resource.messages] == [t.TextContent, t.EmbeddedResource]
        ref = t.PromptReference(type="ref/prompt", name="everything__completable-prompt")
        assert (await client.complete(ref, {"name": "department", "value": "E"})).completion.values == ["Engineering"]
        people = await client.complete(
            ref, {"name": "name", "value": ""}, context_arguments={"department": "Engineering"}
        )
        assert people.completion.values == ["Alice", "Bob", "Charlie"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_inspector_cli_calls_get_prompt_as_a_tool(node: str, tmp_path: Path, transport: str) -> None:
    """Prompts as tools to a TypeScript-SDK client: tools/call get_prompt renders; a denied prompt is as
    absent through the tools as through prompts/get; the tool schemas pass the Inspector's --strict check."""
    upstreams = [demo_upstream("writing", "writing")]
    server = {"prompts_as_tools": True, **(HTTP if transport == "http" else {"transport": "stdio"})}
    config = write_config(tmp_path / "c.toml", upstreams, server=server, policy={"deny": ["writing__proofread"]})

    async def check(target: list[str]) -> None:
        tools = await inspect(node, target, "--method", "tools/list", "--strict")
        assert [tool["name"] for tool in tools["tools"]] == ["list_prompts", "get_prompt"]
        arguments = json.dumps({"text": "hello", "language": "German"})
        got = t.CallToolResult.model_validate(
            await inspect(
                node,
                target,
                "--method",
                "tools/call",
                "--tool-name",
                "get_prompt",
                "--tool-arg",
                "name=writing__translate",
                f"arguments={arguments}",
            )
        )
        assert not got.is_error
        assert isinstance(got.content[0], t.TextContent)
        assert "into German" in got.content[0].text
        separator = [] if target[:1] == ["--config"] else ["--"]
        call = ["--method", "tools/call", "--tool-name", "get_prompt", "--tool-arg", "name=writing__proofread"]
        refused = await run(*inspector(node, *call, *separator, *target), timeout=120)
        assert refused.returncode == 5, refused.stderr.decode()[-2000:]  # the Inspector's "the tool said isError"
        denied = t.CallToolResult.model_validate(json.loads(refused.stdout)["result"])
        assert denied.is_error
        assert denied.content == [t.TextContent(type="text", text="Unknown prompt: writing__proofread")]

    if transport == "stdio":
        await check([sys.executable, "-m", "gateway", "serve", "--config", str(config), "--log-level", "warning"])
        return
    async with running_gateway(config) as gw:
        await check([f"{gw.url}/mcp"])


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_inspector_cli_through_a_round_robin_balancer(node: str, tmp_path: Path, transport: str) -> None:
    """The Inspector CLI (TypeScript SDK) against three replicas behind HAProxy with Redis: the listing it
    pages through (each page from another replica), and a get, over Streamable HTTP and legacy SSE."""
    from tests.integration.test_scale_out import fleet  # haproxy and redis-server: skipped without them

    async with fleet(tmp_path) as f:
        target = [f"{f.url}/mcp" if transport == "http" else f"{f.url}/sse"]  # the CLI tells them by path
        listing = t.ListPromptsResult.model_validate(await inspect(node, target, "--method", "prompts/list"))
        names = [p.name for p in listing.prompts]
        assert {"eng__code_review", "team__standup", "faulty__ok"} <= set(names)
        assert len(names) == len(set(names))
        got = await inspected_prompt(node, target, "eng__commit_message", "diff=+1")
        assert isinstance(got.messages[0].content, t.TextContent)
        assert "+1" in got.messages[0].content.text
