"""``${VAR}`` and ``${VAR:-default}`` in a config's strings, replaced from the environment: anywhere an
unset variable is the whole config's error, but in an upstream, where it is that upstream's alone."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gateway.config.sections import _VARIABLE
from gateway.protocol.errors import ConfigError


def expand_variables(value: Any, environ: Mapping[str, str], path: str = "") -> Any:
    """Replace ``${VAR}`` in every string of a parsed TOML tree."""
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name is None:
                return "$"
            if name not in environ:
                if default is not None:
                    return default
                raise ConfigError(f"{path or '(root)'}: environment variable {name} is not set")
            return environ[name]

        return _VARIABLE.sub(substitute, value)
    if isinstance(value, dict):
        return {k: expand_variables(v, environ, f"{path}.{k}" if path else k) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_variables(v, environ, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def expand_upstreams(data: dict[str, Any], environ: Mapping[str, str]) -> tuple[dict[str, Any], dict[int, str]]:
    """``data`` expanded, and why each upstream that names an unset variable cannot be started: that
    upstream is kept as written (it is validated, never started; where it is invalid as written, as a
    stand-in) and fails alone, as a failing upstream degrades only its own prompts. Anywhere else an
    unset variable is the whole config's error."""
    upstreams = data.pop("upstreams", None)
    expanded = expand_variables(data, environ)
    unresolved: dict[int, str] = {}
    if isinstance(upstreams, list):
        kept = []
        for index, upstream in enumerate(upstreams):
            try:
                kept.append(expand_variables(upstream, environ, f"upstreams[{index}]"))
            except ConfigError as exc:
                unresolved[index] = exc.message
                kept.append(upstream)
        expanded["upstreams"] = kept
    elif upstreams is not None:
        expanded["upstreams"] = expand_variables(upstreams, environ, "upstreams")
    return expanded, unresolved
