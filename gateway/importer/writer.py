"""``prompt-gateway import``: an existing client's MCP config (``clients.py`` reads each client's
file as that client does) turned into this gateway's TOML config.

The output is parsed back and validated before it is printed, so what ``import`` writes always loads.
What the gateway cannot do as the client did (prompt for an input, know the workspace) is said in the
output's header and as warnings; so is what must change before it runs (``notes.py``: a placeholder
copied as a value, a bare ``python``), as a warning and a comment above the server. A server turned off
in the client is written commented out, with a warning naming it.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from typing import Any

from gateway.config import parse_config
from gateway.importer.clients import ClientFormat, read_client_config
from gateway.importer.notes import server_notes
from gateway.protocol.control_chars import escaped, has_control_chars
from gateway.protocol.errors import ConfigError


def _string(value: str) -> str:
    """A TOML basic string (JSON's string escapes are valid TOML); ``value`` is in the gateway's syntax.
    Control characters are escaped (``json`` leaves C1 controls and overrides as they are, and the
    config is read on terminals too), as TOML writes them (``\\U`` beyond the BMP, where JSON would
    write a surrogate pair)."""
    return "".join(_escape(ch) if has_control_chars(ch) else ch for ch in json.dumps(value, ensure_ascii=False))


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_string(str(k))} = {_value(v)}" for k, v in value.items()) + " }"
    raise ConfigError(f"cannot express {value!r} in TOML")


def _namespace(name: str, taken: set[str], separator: str) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-_") or "server"
    base = base.replace(separator, "-").strip(separator[:1]).strip(separator[-1:]) or "server"
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}-{n}", n + 1
    taken.add(candidate)
    return candidate


@dataclass(frozen=True)
class Imported:
    toml: str
    warnings: tuple[str, ...]


def import_client_config(
    text: str,
    *,
    client: ClientFormat = "auto",
    workspace: str | None = None,
    project: str | None = None,
    separator: str = "__",
) -> Imported:
    """The TOML config for the servers in a client's config file, and what to tell the person."""
    read = read_client_config(text, client, workspace=workspace, project=project)
    if not any(not server.disabled for server in read.servers):
        off = ", ".join(server.name for server in read.servers if server.disabled)
        if off:
            raise ConfigError(f"every server the file lists is disabled in the client ({off}): turn one on there first")
        why = "; ".join(read.warnings)  # what was left out, and why (the gateway itself, no command, ...)
        raise ConfigError("the file lists no server the gateway can run" + (f": {why}" if why else " (none usable)"))
    taken: set[str] = set()
    lines = [f"# Imported by `prompt-gateway import` from a {read.client} config.", "#"]
    if read.variables:
        lines.append("# Set these environment variables before the gateway starts (the client asked for them):")
        lines += [f"#   {escaped(name)}: {escaped(text)}" for name, text in sorted(read.variables.items())]
    lines += [
        "# Review env values: prefer ${VAR} references to literal secrets.",
        "# The gateway serves these servers' prompts (and skills), not their tools or resources: keep in the",
        "# client's own config each server whose tools it uses, beside the gateway.",
        "",
        "[gateway]",
        f"namespace_separator = {_string(separator)}",
        "",
        "[server]",
        'transport = "stdio"',
    ]
    every = list(lines)  # the same config with the disabled servers turned on, validated as well
    warnings = [*read.warnings]
    for server in read.servers:
        upstream = {"namespace": _namespace(server.name, taken, separator), **server.settings}
        block = [f"[[upstreams]]  # {_string(server.name)}"]
        block += [f"{key} = {_value(value)}" for key, value in upstream.items()]
        said = [*server.notes, *server_notes(server.settings)]
        notes = [f"# Note: {escaped(note)}" for note in said]
        every += ["", *block]
        if server.disabled:
            warnings.append(f"{server.name}: disabled in the client: written commented out (uncomment it to serve it)")
            lines += ["", *notes]  # before the instruction: uncommenting them too made the file no TOML
            if server.needs:
                lines.append(f"# It then needs {', '.join(server.needs)} set in the gateway's environment.")
            lines.append("# Disabled in the client: remove the '# ' before each line below to serve it.")
            lines += [f"# {line}" for line in block]
        else:
            warnings += [f"{server.name}: {note}" for note in said]
            lines += ["", *notes, *block]
    output = "\n".join(lines) + "\n"
    # Variables are checked when the gateway runs, not here: import runs where they may not be set.
    for config in (output, "\n".join(every) + "\n"):
        try:
            parsed = tomllib.loads(config)
        except tomllib.TOMLDecodeError as exc:  # a lone surrogate: JSON can say it, TOML cannot
            raise ConfigError(f"the file holds text TOML cannot express ({exc})") from exc
        parse_config(parsed, environ=_Everything())
    if read.variables:
        warnings.append("set " + ", ".join(sorted(read.variables)) + " in the gateway's environment (see the header)")
    return Imported(output, tuple(warnings))


class _Everything(dict[str, str]):
    """An environment in which every variable is set, for validating structure alone."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> str:
        return "https://value.example"  # fits where a variable stands for a URL, a token, a path
