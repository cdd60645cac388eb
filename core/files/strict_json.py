"""JSON as the runner takes it from users and from its side files: a key given twice, or a
NaN or Infinity where JSON has none, is an error rather than a value that silently wins."""

from __future__ import annotations

import json
from typing import Any

#: How much of a repeated key an error shows.
SHOWN_KEY_CHARACTERS = 60


def loads(text: str, constants: bool = False) -> Any:
    """`json.loads` with duplicate keys refused, and NaN and Infinity too unless `constants`.
    Raises ValueError (json.JSONDecodeError for text that is no JSON)."""
    return json.loads(text, object_pairs_hook=_unique_keys,
                      parse_constant=None if constants else _no_constant)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            shown = key if len(key) <= SHOWN_KEY_CHARACTERS else key[:SHOWN_KEY_CHARACTERS] + "..."
            raise ValueError(f"the key {shown!r} is given twice")
        found[key] = value
    return found


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
