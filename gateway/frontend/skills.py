"""The Skills extension's methods on the front end (SEP-2640): which methods, what the gateway declares,
and which catalog call answers each. Both eras and every transport reach these through
``PromptService.serve``; ``for_client`` then gives a handshake-era client its revision's shape.

The gateway declares the extension (with ``directoryRead``) and ``resources`` whenever some upstream is
set to serve skills, to every client: the spec gates the methods on the server's declaration and gives
clients no setting of their own, and a client that does not know the extension ignores the entry and
sees skill files, if it lists resources, as the ordinary resources they are. Where no upstream serves
skills nothing changes at all: no capability, and the methods are unknown (-32601), except to a
handshake-era session whose ``initialize`` declared them: what a session was told holds for its life,
so once a reload removed the last skills upstream it lists none and finds none (not -32601).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gateway.catalog.policy import Viewer
from gateway.catalog.skills import SkillCatalog
from gateway.protocol.errors import MethodNotFound, shown
from gateway.protocol.models import parse_params
from gateway.protocol.skills import (
    DIRECTORY_READ_METHOD,
    GET_METHOD,
    LIST_METHOD,
    GetSkillParams,
    ReadDirectoryParams,
    ReadResourceParams,
    extension_capability,
)

_Handler = Callable[[SkillCatalog, dict[str, Any] | None, Viewer | None], Awaitable[dict[str, Any]]]

_HANDLERS: dict[str, _Handler] = {
    LIST_METHOD: lambda skills, params, viewer: skills.list_skills(params, viewer=viewer),
    GET_METHOD: lambda skills, params, viewer: skills.get_skill(params, viewer=viewer),
    "resources/read": lambda skills, params, viewer: skills.read_resource(params, viewer=viewer),
    "resources/list": lambda skills, params, viewer: skills.list_resources(params, viewer=viewer),
    "resources/templates/list": lambda skills, params, viewer: skills.list_templates(params, viewer=viewer),
    DIRECTORY_READ_METHOD: lambda skills, params, viewer: skills.read_directory(params, viewer=viewer),
}
SKILL_METHODS = frozenset(_HANDLERS)
_READ_PARAMS: dict[str, type[GetSkillParams | ReadResourceParams | ReadDirectoryParams]] = {
    GET_METHOD: GetSkillParams,
    "resources/read": ReadResourceParams,
    DIRECTORY_READ_METHOD: ReadDirectoryParams,
}


def parse_skill_read(method: str, params: dict[str, Any] | None) -> None:
    """InvalidParams for a skill read whose params the catalog would refuse (the audit checks first)."""
    parse_params(_READ_PARAMS[method], params)


def skill_capabilities() -> dict[str, Any]:
    """What is added to the gateway's capabilities when it serves skills."""
    return {"resources": {"listChanged": True}, "extensions": extension_capability(directory_read=True)}


async def serve_skills(
    skills: SkillCatalog, method: str, params: dict[str, Any] | None, *, viewer: Viewer | None, declared: bool
) -> dict[str, Any]:
    """``declared``: the client's session was told of the extension at its start (its methods stay)."""
    if not skills.offered and not declared:
        raise MethodNotFound(f"Method not found: {shown(method)}")
    return await _HANDLERS[method](skills, params, viewer)
