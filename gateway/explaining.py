"""``prompt-gateway explain``: why a caller sees a prompt or not. The caller is named as the config knows
it (a ``[[server.tokens]]`` name, or the claims of a person's access token, matched against the views);
the upstreams are asked for their lists as when serving, and the catalog explains each prompt with the
policy code that serves requests (``catalog/explain.py``).
"""

from __future__ import annotations

import codecs
import errno
import json
import os
import select
import stat
import sys
import time
from typing import Any

from gateway.app import run_gateway
from gateway.catalog.explain import Explanation, Layer, not_found
from gateway.catalog.policy import Rules
from gateway.config import Config
from gateway.identity.views import ClaimViews
from gateway.protocol.control_chars import escaped, json_text
from gateway.protocol.errors import ConfigError

EXIT_VISIBLE, EXIT_HIDDEN, EXIT_USAGE = 0, 1, 2


def token_rules(config: Config, token: str) -> Rules:
    """The policy of the ``[[server.tokens]]`` entry named ``token`` (ConfigError naming the known ones)."""
    tokens = {t.name: t for t in config.server.tokens}
    if token not in tokens:
        known = ", ".join(sorted(tokens)) or "none are configured"
        raise ConfigError(f"--token {token!r}: no [[server.tokens]] entry has that name ({known})")
    return Rules.of(tokens[token].policy, config.gateway.namespace_separator)


def caller_layers(config: Config, *, token: str | None, claims: dict[str, Any] | None) -> tuple[str, list[Layer]]:
    """Who is asking, in words, and the policies beyond the global one their requests go through."""
    separator = config.gateway.namespace_separator
    if token is not None:
        return f"token {token}", [Layer(f"the policy of token {token}", token_rules(config, token))]
    if claims is not None:
        if not config.server.views:
            raise ConfigError(
                "--claims: this config has no [[server.views]]: a person sees what the global policy shows"
            )
        matched = ClaimViews(config.server.views, separator).matching(claims)
        who = "a person whose token matches " + (", ".join(f"view {n}" for n, _ in matched) or "no view")
        return who, [Layer(f"view {name}", rules) for name, rules in matched]
    if config.server.tokens or config.server.auth is not None:  # over HTTP here, every caller has a token
        return "a stdio client, the global policy alone (--token NAME or --claims FILE: an HTTP caller's)", []
    return "a caller without a token (stdio, or HTTP without [[server.tokens]])", []


MAX_CLAIMS_BYTES = 1024 * 1024
"""An access token's claims are a few kilobytes; a megabyte is a file that is not one (``/dev/zero``)."""

CLAIMS_TIMEOUT_S = 10.0
"""How long a pipe (``--claims <(jq ...)``) or FIFO may take to be written and closed: a FIFO that no
program writes to would otherwise hold the command for ever."""


def read_claims(path: str) -> dict[str, Any]:
    """The claims in ``path`` (UTF-8 JSON, a BOM allowed), read within the bounds above; a file that
    cannot be used raises ``ConfigError`` saying why (the command exits 2)."""
    try:
        data = _read_bounded(path)
    except OSError as exc:
        raise ConfigError(f"--claims {path}: cannot be read ({exc.strerror or exc})") from exc
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise ConfigError(f"--claims {path}: is UTF-16 or UTF-32 (it starts with a byte order mark): save it as UTF-8")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--claims {path}: is not UTF-8 text (byte {exc.start} cannot be read)") from exc
    try:
        claims = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--claims {path}: is not JSON ({exc})") from exc
    except RecursionError as exc:
        raise ConfigError(f"--claims {path}: nests too deeply to be an access token's claims") from exc
    if not isinstance(claims, dict):
        raise ConfigError(f"--claims {path}: must hold a JSON object of claims, as an access token carries")
    return claims


def _read_bounded(path: str) -> bytes:
    """At most ``MAX_CLAIMS_BYTES`` of ``path``, and from anything but a regular file within
    ``CLAIMS_TIMEOUT_S``: opened without blocking (a FIFO without a writer would block the open itself),
    then read as ``poll`` says it can be (Linux reports nothing on a FIFO no writer has opened yet, so
    that one times out; a pipe whose writer is done ends)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        poller = select.poll() if hasattr(select, "poll") and not stat.S_ISREG(os.fstat(fd).st_mode) else None
        if poller is None:
            os.set_blocking(fd, True)  # a regular file (or no poll, on Windows): reads never wait long
        else:
            poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + CLAIMS_TIMEOUT_S
        chunks: list[bytes] = []
        size = 0
        while True:
            if poller is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(errno.ETIMEDOUT, f"nothing finished writing it within {CLAIMS_TIMEOUT_S:g} s")
                if not poller.poll(left * 1000):
                    continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_CLAIMS_BYTES:
                raise OSError(errno.EFBIG, f"it is larger than {MAX_CLAIMS_BYTES // 1024 // 1024} MiB")
    finally:
        os.close(fd)


async def explain_command(
    config: Config, name: str | None, *, token: str | None, claims_file: str | None, as_json: bool
) -> int:
    claims = read_claims(claims_file) if claims_file is not None else None
    who, layers = caller_layers(config, token=token, claims=claims)
    async with run_gateway(config, settle=True) as gateway:
        explained, skills, unavailable, everything = await gateway.catalog.explain_all(layers, name, refresh=True)
        offers_skills = gateway.catalog.skills.offered
    if as_json:
        decisions = {"caller": who, "prompts": [e.as_json() for e in explained]}
        if offers_skills:
            decisions["skills"] = [e.as_json() for e in skills]
        print(json_text({**decisions, "unavailable": unavailable}, indent=2))
    elif explained or skills or name is None:  # (nothing found: only the stderr line below says so)
        print(f"for {who}:")
        for item in [*explained, *skills]:
            print(escaped(_described(item, whole=name is not None), lines=True))
    for namespace in unavailable:
        print(f"warning: upstream {namespace} is unavailable: what it serves is not explained", file=sys.stderr)
    if name is None:
        return EXIT_VISIBLE
    if not explained and not skills:
        print(escaped(not_found(name, everything)), file=sys.stderr)
        return EXIT_HIDDEN
    return EXIT_VISIBLE if any(e.visible for e in [*explained, *skills]) else EXIT_HIDDEN


def _described(item: Explanation, *, whole: bool) -> str:
    """One prompt's or skill's explanation: in full, or in one line (``--all``)."""
    if whole:
        return "\n".join(item.described())
    what = f"{escaped(item.public)} (skill {item.skill_uri})" if item.skill_uri is not None else escaped(item.public)
    return f"  {what}: {'visible' if item.visible else 'hidden'} — {item.decided_by}"
