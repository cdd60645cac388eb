"""JSON as the runner takes it from users and from its side files, and as it writes it: a key
given twice, or a NaN or Infinity where JSON has none, is an error rather than a value that
silently wins; and nothing it writes holds a NaN or an Infinity (`dumps`)."""

from __future__ import annotations

import json
import math
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


class NonFiniteNumber(ValueError):
    """A value to be written holds NaN or an infinity, which JSON has no number for."""

    def __init__(self, where: str, value: float) -> None:
        super().__init__(f"{where} is {value}, not a JSON number")
        self.where = where
        self.value = value


def dumps(value: Any, compact: bool = True, **options: Any) -> str:
    """The one way the runner writes JSON it keeps (results lines above all): `json.dumps`
    with NaN and the infinities refused (NonFiniteNumber names the first one, by its path:
    `summary.slow_period.ratio`), UTF-8 text as it is, compact unless told otherwise."""
    if compact:
        options.setdefault("separators", (",", ":"))
    try:
        return json.dumps(value, allow_nan=False, ensure_ascii=False, **options)
    except ValueError:
        found = non_finite_numbers(value)
        if found:
            raise NonFiniteNumber(*found[0]) from None
        raise


def non_finite_numbers(value: Any, where: str = "") -> list[tuple[str, float]]:
    """Every NaN or infinity inside `value` (dicts, lists and tuples), with its path."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [(where or "the value", value)]
    if isinstance(value, dict):
        return [found for key, item in value.items()
                for found in non_finite_numbers(item, f"{where}.{key}" if where else str(key))]
    if isinstance(value, (list, tuple)):
        return [found for index, item in enumerate(value)
                for found in non_finite_numbers(item, f"{where}[{index}]")]
    return []


def without_non_finite_numbers(value: Any) -> Any:
    """`value` with every NaN and infinity replaced by None (null), the rest as it is."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: without_non_finite_numbers(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_non_finite_numbers(item) for item in value]
    return value
