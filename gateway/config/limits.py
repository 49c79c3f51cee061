"""``[limits]``: how fast each identity may call (docs/limits.md). Rates are written as the ``limits``
library reads them: ``"600/minute"``, ``"20/second"``, ``"10 per 1 second"``, several joined by ``;``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from gateway.config.sections import _Section


def _valid_rate(value: str) -> str:
    from limits import parse_many  # only a config that sets a rate pays for the library's import
    from limits.util import SEPARATORS, SINGLE_EXPR

    try:
        items = parse_many(value)
    except ValueError as exc:
        raise ValueError('not a rate such as "600/minute" or "20/second;600/minute"') from exc
    if any(item.amount < 1 for item in items):
        raise ValueError("a rate lets at least 1 request through (0 would refuse every request for ever)")
    for part in SEPARATORS.split(value):
        window = SINGLE_EXPR.match(part)
        if window is not None and window.group(3) is not None and int(window.group(3)) == 0:
            # the library reads "per 0 second" as per 1 second: a window nobody wrote
            raise ValueError(f"{part.strip()!r} has a window of no length: say how long, as in '5 per 1 second'")
    return value


Rate = Annotated[str, Field(min_length=3, max_length=200), AfterValidator(_valid_rate)]
LimitedMethod = Literal[
    "prompts/get",
    "completion/complete",
    "prompts/list",
    "tools/list",
    "tools/call",
    "skills/list",
    "skills/get",
    "resources/read",
    "resources/directory/read",
    "resources/list",
]


class LimitsSettings(_Section):
    """Unset, nothing is limited. ``rate`` and ``burst`` hold for each identity (a static token, an
    access token's subject under its issuer, the stdio client; every unauthenticated HTTP caller is one),
    over all its requests; ``methods`` per identity and method on top; ``global_rate`` for all together.
    A token's or a view's own ``rate`` takes the place of ``rate`` for it."""

    rate: Rate | None = None
    burst: Rate | None = None
    """A short window on top of ``rate`` (``"20/second"``): how much of it one identity may spend at once."""
    global_rate: Rate | None = None
    methods: dict[LimitedMethod, Rate] = Field(default_factory=dict)
    strategy: Literal["moving-window", "sliding-window-counter", "fixed-window"] = "moving-window"
    """The ``limits`` strategy: a moving window is exact; a sliding-window counter costs less in Redis."""
    storage_timeout_s: float = Field(0.25, gt=0, le=5)
    """With ``[cluster] redis_url`` the counts live in Redis; an answer slower than this, or none, and the
    replica counts alone (logged) until Redis answers again: a request never waits on Redis for longer."""
