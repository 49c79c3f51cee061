"""What the gateway remembers across runs of a stdio server that died of the era probe (mcp <= 1.8.1 exits
on ``server/discover``): spoken to with the handshake alone from its next start, so that only the first
run ever pays the restart the probe costs. Kept in ``$XDG_CACHE_HOME/prompt-gateway/eras.json`` (else
``~/.cache``), keyed by a digest of the command, its arguments and its directory, written whole and
atomically, bounded; a server that proves modern after all (it refuses the handshake as modern-only) is
forgotten. Losing the file costs one restart, nothing more: every failure here is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

MAX_REMEMBERED = 1000
HANDSHAKE_ONLY = "handshake-only"


def _file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "prompt-gateway" / "eras.json"


def key_of(command: str, args: Sequence[str], cwd: str | None) -> str:
    return hashlib.sha256(json.dumps([command, list(args), cwd]).encode()).hexdigest()[:32]


def _load() -> dict[str, str]:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(_file().read_text())
        if isinstance(data, dict):
            return {str(k): str(v) for k, v in data.items()}
    return {}


def _store(remembered: dict[str, str]) -> None:
    path = _file()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".eras-")
        with os.fdopen(handle, "w") as out:
            json.dump(dict(list(remembered.items())[-MAX_REMEMBERED:]), out)
        os.replace(temporary, path)


def handshake_only(key: str) -> bool:
    return _load().get(key) == HANDSHAKE_ONLY


def remember_handshake_only(key: str) -> None:
    remembered = _load()
    if remembered.get(key) != HANDSHAKE_ONLY:
        remembered.pop(key, None)
        remembered[key] = HANDSHAKE_ONLY  # the newest last: the oldest go first past the bound
        _store(remembered)


def forget(key: str) -> None:
    remembered = _load()
    if remembered.pop(key, None) is not None:
        _store(remembered)
