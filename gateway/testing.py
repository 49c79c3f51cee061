"""Fakes shipped with the package (like httpx's MockTransport): an in-memory prompt source for the
catalog and an in-memory frame-stream pair for rpc, so both are testable without processes or sockets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from gateway.protocol.errors import InvalidParams, UpstreamUnavailable
from gateway.protocol.skills import digest_of
from gateway.sources.files.skills import (
    LocalSkill,
    SkillFile,
    SkillFileError,
    mime_type_of,
    parse_frontmatter,
)


@dataclass
class FakePromptSource:
    """Serves ``prompts`` in pages of ``page_size`` with integer-offset cursors; counts every request."""

    namespace: str
    prompts: list[dict[str, Any]] = field(default_factory=list)
    page_size: int = 10
    announces_list_changes: bool = True
    completes: bool = True
    ready: bool = True
    calls: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)
    fail_with: Callable[[str], Exception] | None = None
    list_ttl_ms: int | None = None  # a 2026-07-28 upstream's freshness hint on each page
    list_private: bool = False
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)  # canned results by method

    @classmethod
    def numbered(cls, namespace: str, count: int, **kwargs: Any) -> FakePromptSource:
        return cls(namespace, [{"name": f"p{i:05d}", "description": f"#{i}"} for i in range(count)], **kwargs)

    def unavailable(self) -> UpstreamUnavailable:
        return UpstreamUnavailable(self.namespace, "is not connected")

    async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        self.calls.append((method, params))
        if not self.ready:
            raise self.unavailable()
        if self.fail_with is not None:
            raise self.fail_with(method)
        await anyio.lowlevel.checkpoint()
        if method in self.replies:
            return self.replies[method]
        if method == "prompts/list":
            start = int((params or {}).get("cursor") or 0)
            end = start + self.page_size
            result: dict[str, Any] = {"prompts": self.prompts[start:end]}
            if end < len(self.prompts):
                result["nextCursor"] = str(end)
            if self.list_ttl_ms is not None:
                result.update(ttlMs=self.list_ttl_ms, cacheScope="private" if self.list_private else "public")
            return result
        if method == "prompts/get":
            assert params is not None  # noqa: S101
            if not any(p["name"] == params["name"] for p in self.prompts):
                raise InvalidParams(f"Unknown prompt: {params['name']}")
            text = f"{self.namespace}:{params['name']}:{sorted((params.get('arguments') or {}).items())}"
            return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}
        if method == "completion/complete":
            assert params is not None  # noqa: S101
            return {"completion": {"values": [f"{params['ref']['name']}:{params['argument']['value']}"]}}
        raise InvalidParams(f"unexpected method {method}")

    def count(self, method: str) -> int:
        return sum(1 for m, _ in self.calls if m == method)


@dataclass
class MemoryFrameStream:
    """One end of an in-memory frame pipe; ``memory_frame_pair()`` makes two connected ends."""

    _send: MemoryObjectSendStream[bytes]
    _receive: MemoryObjectReceiveStream[bytes]

    async def send(self, frame: bytes) -> None:
        await self._send.send(frame)

    async def receive(self) -> bytes:
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()


def memory_frame_pair(buffer: int = 64) -> tuple[MemoryFrameStream, MemoryFrameStream]:
    a_send, b_receive = anyio.create_memory_object_stream[bytes](buffer)
    b_send, a_receive = anyio.create_memory_object_stream[bytes](buffer)
    return MemoryFrameStream(a_send, a_receive), MemoryFrameStream(b_send, b_receive)


@dataclass
class FakeSkillSource(FakePromptSource):
    """A prompt source that also serves skills, each given as its files' bytes by path (``SKILL.md``
    among them), read by the same rules as a skill folder on disk."""

    skills: dict[str, LocalSkill] = field(default_factory=dict)
    offers_skills: bool = True

    def add_skill(self, skill_path: str, files: dict[str, bytes]) -> LocalSkill:
        skill = skill_of(skill_path, files)
        self.skills[skill_path] = skill
        return skill


def skill_of(skill_path: str, files: dict[str, bytes]) -> LocalSkill:
    """A skill made of bytes in memory (SkillFileError where a folder of these files would be refused)."""
    read = {path: SkillFile(path, data, digest_of(data), mime_type_of(path, data)) for path, data in files.items()}
    frontmatter = parse_frontmatter(files["SKILL.md"])
    if frontmatter["name"] != skill_path.rsplit("/", 1)[-1]:
        raise SkillFileError(f"the name {frontmatter['name']!r} is not its folder's")
    folders = {"/".join(p.split("/")[: i + 1]) for p in files for i in range(p.count("/"))}
    return LocalSkill(skill_path, f"{skill_path}/SKILL.md", frontmatter, read, frozenset({"", *folders}))
