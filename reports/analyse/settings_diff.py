"""The settings that differ between two results files, for `experiment-runner compare`.

Each line records the numeric and runtime settings in force while it timed under
`environment.torch_settings` (docs/settings.md). A setting differs when the values its lines
hold in BASE are not the values they hold in NEW (over all lines of each side, so a setting
that varies with the experiments, such as the autocast dtype, differs only where the two
sides' experiments do). Where a line ran (`cpu_affinity`) is not a setting and is left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

SETTINGS_KEY = "torch_settings"
#: Where a line ran rather than how: not compared (runner/child/settings.py PLACEMENT_KEYS).
PLACEMENT_KEYS = frozenset({"cpu_affinity"})


@dataclass(frozen=True)
class SettingDifference:
    """One setting and the distinct values its lines hold on each side (as JSON text; a
    side whose lines lack it reads "-")."""

    name: str
    base: tuple[str, ...]
    new: tuple[str, ...]


def results_files(paths: Sequence[Path]) -> Iterator[Path]:
    """The files themselves, and every *.jsonl under a folder."""
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        else:
            yield path


def settings_values(paths: Sequence[Path]) -> tuple[dict[str, set[str]], int]:
    """Each setting's distinct values over the lines of `paths`, and how many lines held
    settings. Lines that are not JSON objects are skipped (the loader reports them)."""
    values: dict[str, set[str]] = {}
    lines = 0
    seen: set[str] = set()
    for path in results_files(paths):
        with open(path, encoding="utf-8", errors="replace") as text:
            for raw in text:
                settings = _settings_of_text(raw)
                if settings is None:
                    continue
                lines += 1
                canonical = json.dumps(settings, sort_keys=True)
                if canonical in seen:  # most lines of a run hold the same settings
                    continue
                seen.add(canonical)
                for name, value in settings.items():
                    if name not in PLACEMENT_KEYS:
                        values.setdefault(name, set()).add(json.dumps(value, sort_keys=True))
    return values, lines


_DECODER = json.JSONDecoder()
_SETTINGS_MARK = re.compile(rf'"{SETTINGS_KEY}"\s*:\s*')


def _settings_of_text(raw: str) -> dict[str, Any] | None:
    """A line's `environment.torch_settings`. Where a whole object's line holds the key once,
    only that object is decoded (a line is mostly metrics and summary, and decoding all of it
    is most of the time over a large file); otherwise the whole line is."""
    marks = _SETTINGS_MARK.finditer(raw)
    first = next(marks, None)
    if first is None:
        return None
    line = raw.strip()
    if next(marks, None) is None and line.startswith("{") and line.endswith("}"):
        try:
            value, _ = _DECODER.raw_decode(raw, first.end())
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    try:
        return _settings_of(json.loads(raw))
    except ValueError:
        return None


def _settings_of(line: Any) -> dict[str, Any] | None:
    if not isinstance(line, dict):
        return None
    environment = line.get("environment")
    settings = environment.get(SETTINGS_KEY) if isinstance(environment, dict) else None
    return settings if isinstance(settings, dict) else None


def settings_differences(base: Sequence[Path], new: Sequence[Path]
                         ) -> Optional[list[SettingDifference]]:
    """The settings whose values differ between BASE's lines and NEW's, by name; None where
    either side holds no settings (lines older than the record)."""
    base_values, base_lines = settings_values(base)
    new_values, new_lines = settings_values(new)
    if not (base_lines and new_lines):
        return None
    differences = []
    for name in sorted(set(base_values) | set(new_values)):
        theirs, ours = base_values.get(name, set()), new_values.get(name, set())
        if theirs != ours:
            differences.append(SettingDifference(name, tuple(sorted(theirs)) or ("-",),
                                                 tuple(sorted(ours)) or ("-",)))
    return differences
