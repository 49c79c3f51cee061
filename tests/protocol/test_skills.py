"""The Skills extension's wire rules (SEP-2640): digests, URIs, and which entries are refused."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from pydantic import ValidationError

from gateway.protocol.skills import Skill, digest_of, skill_root, split_skill_uri, valid_name

DIGEST = "sha256:" + "a" * 64


def entry(**changes: Any) -> dict[str, Any]:
    good: dict[str, Any] = {
        "uri": "skill://acme/billing/refunds/SKILL.md",
        "frontmatter": {"name": "refunds", "description": "Refunds", "license": "MIT"},
        "resources": [
            {"uri": "skill://acme/billing/refunds/SKILL.md", "digest": DIGEST, "size": 10},
            {"uri": "skill://acme/billing/refunds/examples/email.md", "digest": DIGEST, "size": 0},
        ],
    }
    return {**good, **changes}


def test_a_digest_is_sha256_of_the_raw_bytes_in_lower_case_hex() -> None:
    assert digest_of(b"abc") == "sha256:" + hashlib.sha256(b"abc").hexdigest()


def test_the_specs_own_examples_are_valid_entries() -> None:
    Skill.model_validate(entry())
    Skill.model_validate(entry(resources="dynamic"))


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"resources": None}, "resources"),  # an entry without resources is invalid
        ({"resources": "static"}, "resources"),
        ({"uri": "skill://acme/billing/refunds/README.md"}, "does not name a SKILL.md"),
        ({"uri": "skill://acme/billing/refund/SKILL.md"}, "not the frontmatter name"),
        ({"frontmatter": {"name": "refunds"}}, "description"),
        # what the Inspector's --verify fails a skill for (anthropics/skills' claude-api has 1068 characters)
        ({"frontmatter": {"name": "refunds", "description": "x" * 1025}}, "1025 characters, above the spec's limit"),
        ({"frontmatter": {"name": "refunds", "description": " \n"}}, "description is blank"),
        (
            {"uri": "skill://acme/billing/Refunds/SKILL.md", "frontmatter": {"name": "Refunds", "description": "R"}},
            "breaks the spec's rules",
        ),
        (
            {"resources": [{"uri": "skill://acme/billing/refunds/SKILL.md", "digest": "sha256:ABC", "size": 1}]},
            "digest",
        ),
        ({"resources": [{"uri": "skill://acme/billing/refunds/SKILL.md", "digest": DIGEST, "size": -1}]}, "size"),
        ({"resources": [{"uri": "skill://acme/billing/refunds/a.md", "digest": DIGEST, "size": 1}]}, "do not list"),
        (
            {
                "resources": [
                    {"uri": "skill://acme/billing/refunds/SKILL.md", "digest": DIGEST, "size": 1},
                    {"uri": "skill://acme/billing/other/a.md", "digest": DIGEST, "size": 1},
                ]
            },
            "not in the skill's folder",
        ),
        (
            {"resources": [{"uri": "skill://acme/billing/refunds/SKILL.md", "digest": DIGEST, "size": 1}] * 2},
            "twice",
        ),
        *(  # a tester's relayed `skill://trav/../good/SKILL.md`: another skill's file to a host normalising it
            (
                {
                    "resources": [
                        {"uri": "skill://acme/billing/refunds/SKILL.md", "digest": DIGEST, "size": 1},
                        {"uri": f"skill://acme/billing/refunds/{path}", "digest": DIGEST, "size": 1},
                    ]
                },
                "not in the skill's folder",
            )
            for path in ("../other/SKILL.md", "a/../../x", "./a.md", "a//b", "%2e%2e/x", "a%2Fb", "a/.")
        ),
        (  # past what JSON numbers hold exactly
            {"resources": [{"uri": "skill://acme/billing/refunds/SKILL.md", "digest": DIGEST, "size": 2**53}]},
            "size",
        ),
        (
            {
                "resources": [
                    {"uri": "skill://acme/billing/refunds/SKILL.md", "digest": DIGEST, "size": 1},
                    {"uri": "skill://acme/billing/refunds/big.bin", "digest": DIGEST, "size": 16 * 1024 * 1024},
                ]
            },
            "more than 16777216 bytes",
        ),
        (
            {
                "resources": [
                    {"uri": f"skill://acme/billing/refunds/{i}.md", "digest": DIGEST, "size": 1} for i in range(513)
                ]
            },
            "more than 512",
        ),
    ],
)
def test_entries_that_break_the_rules_are_refused(changes: dict[str, Any], why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        Skill.model_validate(entry(**changes))


def test_skill_uris_split_into_their_first_segment_and_the_rest_one_spelling_only() -> None:
    assert split_skill_uri("skill://team/pdf/SKILL.md") == ("team", "pdf/SKILL.md")
    assert split_skill_uri("skill://team") == ("team", "")
    for other in ("skill://team/../x/SKILL.md", "skill://team//pdf", "skill://team/", "skill://", "file:///x"):
        assert split_skill_uri(other) is None, other
    assert skill_root("skill://a/b/SKILL.md") == "skill://a/b"
    assert skill_root("skill://SKILL.md") is None


def test_names_follow_the_agent_skills_rules() -> None:
    assert valid_name("pdf-processing")
    for bad in ("PDF", "-pdf", "pdf-", "pd--f", "", "a" * 65, "pdf_x"):
        assert not valid_name(bad), bad
