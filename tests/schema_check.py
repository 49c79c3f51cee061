"""Validate a message against the official JSON Schema of one MCP revision (copies in tests/schemas)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema.validators import validator_for

SCHEMAS = Path(__file__).parent / "schemas"


@cache
def _schema(revision: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{revision}.json").read_text())  # type: ignore[no-any-return]


def check(revision: str, definition: str, instance: Any) -> None:
    """Raise jsonschema.ValidationError unless ``instance`` is a valid ``definition`` of ``revision``."""
    schema = _schema(revision)
    defs = "$defs" if "$defs" in schema else "definitions"
    root = {"$schema": schema["$schema"], defs: schema[defs], "$ref": f"#/{defs}/{definition}"}
    validator_for(root)(root).validate(instance)
