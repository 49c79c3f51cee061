"""Wire models for what the gateway must understand; everything else it relays as raw JSON.

Models validate (strictly: no coercion of 1 into "1") but are never re-serialised: the gateway forwards
the original dict, so unknown fields (``title``, ``icons``, ``_meta``, future ones) pass untouched.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal, NamedTuple, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict

from gateway.protocol.errors import InvalidParams, shown

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


class ClientInfo(_Wire):
    name: str
    version: str | None = None  # required by the schema; never read here, so a client leaving it out is served


class InitializeParams(_Wire):
    """What ``initialize`` carries, in the schema's types: a revision to negotiate from, the client's
    capabilities and who it is (each was taken as it came, and a session begun on a number or a list)."""

    protocolVersion: str
    capabilities: dict[str, Any]
    clientInfo: ClientInfo


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


# A prompt's result is checked by one validator over typed dicts, never made into models: it is relayed
# as the dict it came as, and building a model a message and a content block cost a tenth of the
# gateway's own work on a relayed get. Content is told apart by its "type" (a tagged union); a type from
# a future revision is relayed as it is, so long as it says its type.

_OBJECT = ConfigDict(extra="allow", strict=True)
_KIND_TAG = "content-type="
"""Prefix of the tags that tell content blocks apart: ``describe`` leaves them out of a field's path."""


@with_config(_OBJECT)
class TextContent(TypedDict):
    type: Literal["text"]
    text: str


@with_config(_OBJECT)
class ImageContent(TypedDict):
    type: Literal["image"]
    data: Base64
    mimeType: str


@with_config(_OBJECT)
class AudioContent(TypedDict):
    type: Literal["audio"]
    data: Base64
    mimeType: str


@with_config(_OBJECT)
class TextResourceContents(TypedDict):
    uri: str
    text: str


@with_config(_OBJECT)
class BlobResourceContents(TypedDict):
    uri: str
    blob: Base64


@with_config(_OBJECT)
class EmbeddedResource(TypedDict):
    type: Literal["resource"]
    resource: TextResourceContents | BlobResourceContents


@with_config(_OBJECT)
class ResourceLink(TypedDict):
    type: Literal["resource_link"]
    uri: str
    name: str


@with_config(_OBJECT)
class FutureContent(TypedDict):
    type: str


_KNOWN_CONTENT = ("text", "image", "audio", "resource", "resource_link")


_KIND_TAGS = frozenset(_KIND_TAG + kind for kind in (*_KNOWN_CONTENT, "future"))


def _content_kind(block: Any) -> str:
    kind = block.get("type") if isinstance(block, dict) else None
    return _KIND_TAG + (kind if kind in _KNOWN_CONTENT else "future")


Content = Annotated[
    Annotated[TextContent, Tag(_KIND_TAG + "text")]
    | Annotated[ImageContent, Tag(_KIND_TAG + "image")]
    | Annotated[AudioContent, Tag(_KIND_TAG + "audio")]
    | Annotated[EmbeddedResource, Tag(_KIND_TAG + "resource")]
    | Annotated[ResourceLink, Tag(_KIND_TAG + "resource_link")]
    | Annotated[FutureContent, Tag(_KIND_TAG + "future")],
    Discriminator(_content_kind),
]


@with_config(_OBJECT)
class PromptMessage(TypedDict):
    role: Literal["user", "assistant"]
    content: Content


@with_config(_OBJECT)
class _GetPromptResult(TypedDict):
    messages: list[PromptMessage]


GET_PROMPT_RESULT: TypeAdapter[_GetPromptResult] = TypeAdapter(_GetPromptResult)
"""A ``prompts/get`` result as the spec shapes it (``validate_python``; the copy it returns is not used)."""

_ROLES = ("user", "assistant")


def plain_text_result(raw: Any) -> bool:
    """Whether a ``prompts/get`` result is messages of plain text alone, each as ``GET_PROMPT_RESULT``
    surely accepts it: what nearly every result is, recognised in a few lines. The validator costs about
    15,000 instructions a result (3.5% of a relayed get), so it is asked only about the others, and it
    alone decides them and words what is wrong."""
    messages = raw.get("messages") if type(raw) is dict else None
    if type(messages) is not list:
        return False
    for message in messages:
        if type(message) is not dict or message.get("role") not in _ROLES:
            return False
        content = message.get("content")
        if type(content) is not dict or content.get("type") != "text" or type(content.get("text")) is not str:
            return False
    return True


def check_prompt_result(raw: dict[str, Any]) -> None:
    """A ``prompts/get`` result checked against the spec's shape; raises ``ValidationError``."""
    if not plain_text_result(raw):
        GET_PROMPT_RESULT.validate_python(raw)


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
        loc = error["loc"]
        parts_shown = [
            shown(str(p))
            for i, p in enumerate(loc)
            if not str(p).startswith("function-") and not (p in _KIND_TAGS and i and loc[i - 1] == "content")
        ]
        path = ".".join([root] * bool(root) + parts_shown)
        parts.append(f"{path or '(root)'}: {error['msg']}")
    return "; ".join(parts)


def parse_params(model: type[_Model], params: dict[str, Any] | None) -> _Model:
    """Validate a client's params, turning a pydantic error into -32602 naming the field."""
    try:
        return model.model_validate(params or {})
    except ValidationError as exc:
        raise InvalidParams(f"Invalid params: {describe(exc, 'params')}") from exc


class PromptGet(NamedTuple):
    """A ``prompts/get``'s params as checked: the prompt's name and the arguments given."""

    name: str
    arguments: dict[str, str] | None


def prompt_get(params: dict[str, Any] | None) -> PromptGet:
    """A ``prompts/get``'s params checked as ``GetPromptParams`` checks them: a text name, and arguments
    that are text (or none). That shape, every valid get's, is recognised in a few lines; anything else
    goes to the model, which alone decides and words what is wrong (-32602). (Validating and building
    the model cost more than the rest of the params' handling on a relayed get.)"""
    if type(params) is dict:
        name, arguments = params.get("name"), params.get("arguments")
        if type(name) is str and (arguments is None or _text_values(arguments)):
            return PromptGet(name, arguments)
    checked = parse_params(GetPromptParams, params)
    return PromptGet(checked.name, checked.arguments)


def _text_values(arguments: Any) -> bool:
    return type(arguments) is dict and all(type(value) is str for value in arguments.values())
