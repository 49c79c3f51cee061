"""Wire models for what the gateway must understand; everything else it relays as raw JSON.

Models validate (strictly: no coercion of 1 into "1") but are never re-serialised: the gateway forwards
the original dict, so unknown fields (``title``, ``icons``, ``_meta``, future ones) pass untouched.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from gateway.protocol.errors import InvalidParams

_Model = TypeVar("_Model", bound=BaseModel)


class _Wire(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)


def _is_base64(value: str) -> str:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not valid base64") from exc
    return value


Base64 = Annotated[str, AfterValidator(_is_base64)]

# ---- what clients send ------------------------------------------------------------------------


class ListParams(_Wire):
    cursor: Any = None  # judged by the cursor codec, so every bad cursor gets the same "Invalid cursor"


class GetPromptParams(_Wire):
    name: str
    arguments: dict[str, str] | None = None


class PromptRef(_Wire):
    type: Literal["ref/prompt"]
    name: str


class ResourceRef(_Wire):
    type: Literal["ref/resource"]
    uri: str


class CompletionArgument(_Wire):
    name: str
    value: str


class CompletionContext(_Wire):
    arguments: dict[str, str] | None = None


class CompleteParams(_Wire):
    ref: PromptRef | ResourceRef = Field(discriminator="type")
    argument: CompletionArgument
    context: CompletionContext | None = None


# ---- what upstreams answer --------------------------------------------------------------------


class InitializeResult(_Wire):
    protocolVersion: str
    capabilities: dict[str, Any]
    serverInfo: dict[str, Any] | None = None


class PromptArgument(_Wire):
    name: str
    required: bool | None = None


class Prompt(_Wire):
    name: str
    arguments: list[PromptArgument] | None = None


class ListPromptsResult(_Wire):
    prompts: list[Prompt]
    nextCursor: str | None = None
    ttlMs: int | float | None = None  # a negative hint is read as 0, as the spec asks of clients
    cacheScope: Literal["public", "private"] | None = None


class TextContent(_Wire):
    type: Literal["text"]
    text: str


class ImageContent(_Wire):
    type: Literal["image"]
    data: Base64
    mimeType: str


class AudioContent(_Wire):
    type: Literal["audio"]
    data: Base64
    mimeType: str


class TextResourceContents(_Wire):
    uri: str
    text: str


class BlobResourceContents(_Wire):
    uri: str
    blob: Base64


class EmbeddedResource(_Wire):
    type: Literal["resource"]
    resource: TextResourceContents | BlobResourceContents


class ResourceLink(_Wire):
    type: Literal["resource_link"]
    uri: str
    name: str


_KNOWN_CONTENT: dict[str, type[_Wire]] = {
    "text": TextContent,
    "image": ImageContent,
    "audio": AudioContent,
    "resource": EmbeddedResource,
    "resource_link": ResourceLink,
}


def _known_content_is_valid(block: dict[str, Any]) -> dict[str, Any]:
    """Check the content types we know; a type from a future revision is relayed as it is."""
    kind = block.get("type")
    if not isinstance(kind, str):
        raise TypeError('content needs a string "type"')
    model = _KNOWN_CONTENT.get(kind)
    if model is not None:
        model.model_validate(block)
    return block


Content = Annotated[dict[str, Any], AfterValidator(_known_content_is_valid)]


class PromptMessage(_Wire):
    role: Literal["user", "assistant"]
    content: Content


class GetPromptResult(_Wire):
    messages: list[PromptMessage]


class InputRequiredResult(_Wire):
    """2026-07-28: the upstream needs the client to answer ``inputRequests`` and retry; relayed as is."""

    resultType: Literal["input_required"]
    inputRequests: dict[str, dict[str, Any]] | None = None
    requestState: str | None = None

    @model_validator(mode="after")
    def _asks_for_something(self) -> InputRequiredResult:
        if self.inputRequests is None and self.requestState is None:
            raise ValueError("needs inputRequests or requestState")
        return self


class DiscoverResult(_Wire):
    supportedVersions: list[str]
    capabilities: dict[str, Any]


class Completion(_Wire):
    values: list[str] = Field(max_length=100)
    total: int | None = None
    hasMore: bool | None = None


class CompleteResult(_Wire):
    completion: Completion


def describe(exc: ValidationError, root: str = "") -> str:
    """One line naming each bad field by its path, e.g. ``arguments.city: Input should be a valid string``
    (``params.arguments.city`` with ``root="params"``)."""
    parts = []
    for error in exc.errors(include_url=False)[:5]:
        path = ".".join([root] * bool(root) + [str(p) for p in error["loc"] if not str(p).startswith("function-")])
        parts.append(f"{path or '(root)'}: {error['msg']}")
    return "; ".join(parts)


def parse_params(model: type[_Model], params: dict[str, Any] | None) -> _Model:
    """Validate a client's params, turning a pydantic error into -32602 naming the field."""
    try:
        return model.model_validate(params or {})
    except ValidationError as exc:
        raise InvalidParams(f"Invalid params: {describe(exc, 'params')}") from exc
