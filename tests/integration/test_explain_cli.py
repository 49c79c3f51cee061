"""``prompt-gateway explain`` against the real thing: what it calls visible for a token is exactly what the
HTTP front end lists for that token, and a hidden prompt names the policy and rule that hid it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.integration.helpers import ROOT, demo_upstream, running_gateway, team_skills, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CI = "ci-token-0123456789abcdef"


def config(tmp_path: Path, *, skills_alone: bool = False) -> Path:
    team = {
        "namespace": "team",
        "transport": "files",
        "path": str(team_skills(tmp_path / "repo")),
        "skills_as": "skills",
    }
    return write_config(
        tmp_path / "g.toml",
        [
            *([] if skills_alone else [demo_upstream("writing", "writing")]),
            *([] if skills_alone else [demo_upstream("eng", "engineering", policy={"deny": ["internal_*"]})]),
            {**team, "policy": {"deny_tags": ["secret"]}},
        ],
        server={"transport": "http", "port": 0},
        tokens=[{"name": "ci", "token": CI, "policy": {"allow": ["*"], "deny": ["eng__commit_*", "team__BILLING/*"]}}],
        policy={"deny": ["writing__proofread"], "deny_tags": ["docs"]},
    )


def explain(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "gateway", "explain", *args, "--config", str(path)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, timeout=60)


async def test_explain_answers_as_the_server_lists(tmp_path: Path) -> None:
    path = config(tmp_path)
    explained = explain(path, "--all", "--token", "ci", "--json")
    assert explained.returncode == 0, explained.stderr
    decisions = json.loads(explained.stdout)
    assert decisions["caller"] == "token ci"
    visible = {p["name"] for p in decisions["prompts"] if p["visible"]}
    skills = {s["uri"] for s in decisions["skills"] if s["visible"]}
    async with running_gateway(path) as gateway, httpx.AsyncClient(timeout=30) as http:
        envelope = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        }

        async def as_ci(request_id: int, method: str) -> httpx.Response:
            return await http.post(
                f"{gateway.url}/mcp",
                json={"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"_meta": envelope}},
                headers={
                    "Authorization": f"Bearer {CI}",
                    "Accept": "application/json, text/event-stream",
                    "MCP-Protocol-Version": "2026-07-28",
                    "Mcp-Method": method,
                },
            )

        listed = await as_ci(1, "prompts/list")
        served = await as_ci(2, "skills/list")
    assert visible == {p["name"] for p in listed.json()["result"]["prompts"]}
    assert "eng__commit_message" not in visible
    assert skills == {s["uri"] for s in served.json()["result"]["skills"]} == {"skill://team/refunds/SKILL.md"}


def test_a_skill_is_explained_by_its_policy_name_or_its_uri(tmp_path: Path) -> None:
    """docs/skills.md: policy judges a skill by ``<namespace><sep><path>``; explain takes that name or the
    skill's URI, and names the rule: a look-alike of a token's deny, a tag the global policy denies."""
    path = config(tmp_path, skills_alone=True)
    refunds = explain(path, "team__refunds", "--token", "ci")
    assert refunds.returncode == 0, refunds.stderr
    assert "team__refunds: visible  (the skill skill://team/refunds/SKILL.md of upstream team" in refunds.stdout
    billing = explain(path, "skill://team/billing/refunds/SKILL.md", "--token", "ci")
    assert billing.returncode == 1
    assert "the policy of token ci: hides it, deny 'team__BILLING/*' (a look-alike of the name)" in billing.stdout
    every = explain(path, "--all")
    assert every.returncode == 0, every.stderr
    assert (
        "  team__pdf (skill skill://team/pdf/SKILL.md): hidden — the global [policy]: deny_tags 'docs' (its tag 'docs')"
        in every.stdout
    )
    typo = explain(path, "team__pfd")
    assert (typo.returncode, typo.stderr.strip()) == (
        1,
        "no upstream lists a prompt or a skill named 'team__pfd' (did you mean team__pdf, team__refunds?)",
    )
    # a tester: one of a skill's files was "no upstream lists a prompt or a skill named ..."; it is read by
    # whoever sees its skill, and render said "Unknown prompt" of a skill served as a skill only
    form = explain(path, "skill://team/pdf/forms/w9.md")
    assert "team__pdf: hidden  (the skill skill://team/pdf/SKILL.md of upstream team" in form.stdout, form.stderr
    command = [sys.executable, "-m", "gateway", "render", "team__refunds", "--config", str(path)]
    rendered = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, timeout=60)
    assert rendered.returncode == 1
    assert rendered.stderr.strip().splitlines()[-1] == (
        "prompt-gateway: Unknown prompt: team__refunds: it is the skill skill://team/refunds/SKILL.md, "
        "served as a skill only (skills/get reads it)"
    )


def test_a_hidden_prompt_names_the_policy_and_rule_that_hid_it(tmp_path: Path) -> None:
    path = config(tmp_path)
    hidden = explain(path, "eng__commit_message", "--token", "ci")
    assert hidden.returncode == 1
    assert "eng__commit_message: hidden" in hidden.stdout
    assert "the policy of token ci: hides it, deny 'eng__commit_*' (the name)" in hidden.stdout
    upstream_rule = explain(path, "eng__internal_debug_dump")
    assert "the policy of upstream eng: hides it, deny 'internal_*' (the name)" in upstream_rule.stdout
    global_rule = explain(path, "writing__proofread", "--json")
    assert json.loads(global_rule.stdout)["prompts"][0]["decidedBy"] == (
        "the global [policy]: deny 'writing__proofread' (the name)"
    )
    assert explain(path, "eng__code_review", "--token", "ci").returncode == 0


def test_explain_says_what_it_cannot_explain(tmp_path: Path) -> None:
    path = config(tmp_path)
    unknown_token = explain(path, "eng__code_review", "--token", "nobody")
    assert unknown_token.returncode == 2
    assert "no [[server.tokens]] entry has that name (ci)" in unknown_token.stderr
    typo = explain(path, "eng__code_reveiw")
    assert typo.returncode == 1
    assert "did you mean eng__code_review" in typo.stderr
    assert typo.stdout == ""  # (a tester saw the caller's header alone on stdout, the answer on stderr)
    tokenless = explain(path, "eng__code_review")  # with [[server.tokens]]: every HTTP caller has one
    assert tokenless.stdout.startswith("for a stdio client, the global policy alone (--token NAME or --claims"), (
        tokenless.stdout
    )
    claims = tmp_path / "claims.json"
    claims.write_text("[1, 2]")
    assert "must hold a JSON object of claims" in explain(path, "--all", "--claims", str(claims)).stderr
    assert explain(path, "--config-less").returncode == 2


def views_config(tmp_path: Path) -> Path:
    python = json.dumps(sys.executable)
    path = tmp_path / "views.toml"
    path.write_text(f"""
[server]
transport = "http"
port = 0
[server.auth]
resource = "http://127.0.0.1:9/mcp"
[[server.auth.issuers]]
issuer = "https://issuer.example"
[[server.views]]
name = "outsiders"
match = {{ claim = "groups", none_of = ["eng"] }}
policy = {{ allow = ["*"], deny = ["eng__*"] }}
[[upstreams]]
namespace = "eng"
command = {python}
args = ["-m", "gateway.demo.engineering"]
""")
    return path


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'{"groups": ["\xff"]}', "is not UTF-8 text (byte 13 cannot be read)"),
        (
            '{"groups": ["eng"]}'.encode("utf-16"),
            "is UTF-16 or UTF-32 (it starts with a byte order mark): save it as UTF-8",
        ),
        (DEEP, "nests too deeply to be an access token's claims"),
        (b"{" + b'"a": 1, ' * 200_000 + b"}", "cannot be read (it is larger than 1 MiB)"),
    ],
    ids=["not-utf8", "utf16", "deep", "large"],
)
def test_a_bad_claims_file_exits_2_saying_why_in_one_line(tmp_path: Path, content: bytes, why: str) -> None:
    claims = tmp_path / "claims.json"
    claims.write_bytes(content)
    refused = explain(views_config(tmp_path), "--all", "--claims", str(claims))
    assert (refused.returncode, refused.stderr.splitlines()) == (2, [f"prompt-gateway: --claims {claims}: {why}"])


@pytest.mark.parametrize(("path", "why"), [("/dev/zero", "it is larger than 1 MiB"), (".", "is a directory")])
def test_a_claims_path_that_is_no_file_exits_2_saying_why(tmp_path: Path, path: str, why: str) -> None:
    refused = explain(views_config(tmp_path), "--all", "--claims", path)
    assert (refused.returncode, refused.stderr.splitlines()) == (
        2,
        [f"prompt-gateway: --claims {path}: cannot be read ({why})"],
    )


def test_claims_from_a_process_substitution_and_a_written_fifo_are_read(tmp_path: Path) -> None:
    path = views_config(tmp_path)
    command = " ".join([sys.executable, "-m", "gateway", "explain", "--all", "--config", str(path)])
    substituted = subprocess.run(
        ["bash", "-c", f"""{command} --claims <(sleep 0.2; printf '{{"groups": ["ops"]}}')"""],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert substituted.returncode == 0, substituted.stderr
    assert "for a person whose token matches view outsiders:" in substituted.stdout
    fifo = tmp_path / "claims.fifo"
    os.mkfifo(fifo)
    with subprocess.Popen(["sh", "-c", f"""printf '{{"groups": ["eng"]}}' > {fifo}"""]) as writer:
        written = explain(path, "--all", "--claims", str(fifo))
        writer.wait(timeout=30)
    assert written.returncode == 0, written.stderr
    assert "for a person whose token matches no view:" in written.stdout


def test_a_fifo_nothing_writes_to_times_out_with_exit_2(tmp_path: Path) -> None:
    fifo = tmp_path / "claims.fifo"
    os.mkfifo(fifo)
    waited = explain(views_config(tmp_path), "--all", "--claims", str(fifo))
    assert (waited.returncode, waited.stderr.splitlines()) == (
        2,
        [f"prompt-gateway: --claims {fifo}: cannot be read (nothing finished writing it within 10 s)"],
    )


def test_list_shows_a_tokens_view_with_token(tmp_path: Path) -> None:
    """``list`` showed only what a tokenless caller sees, which over HTTP with tokens no client gets (a new
    user had to find ``explain --all --token``)."""
    path = config(tmp_path)

    def listed(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "gateway", "list", "--json", *args, "--config", str(path)]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, timeout=60)

    tokenless = {p["name"] for p in json.loads(listed().stdout)}
    ci = {p["name"] for p in json.loads(listed("--token", "ci").stdout)}
    assert any(name.startswith("eng__commit_") for name in tokenless)
    assert ci == {name for name in tokenless if not name.startswith("eng__commit_")}  # its policy's deny
    billing = [s for s in json.loads(listed("--skills").stdout) if s["policyName"].startswith("team__billing/")]
    assert billing  # the token's policy denies team__BILLING/* (look-alikes too): gone under it alone
    skills = json.loads(listed("--skills", "--token", "ci").stdout)
    assert skills
    assert not [s for s in skills if s["policyName"].startswith("team__billing/")]
    unknown = listed("--token", "nobody")
    assert unknown.returncode == 2
    assert "no [[server.tokens]] entry has that name (ci)" in unknown.stderr
