"""The settings that differ between two results files, for `experiment-runner compare`.

Each line records the numeric and runtime settings in force while it timed under
`environment.torch_settings` (docs/settings.md). A setting differs when the values its lines
hold in BASE are not the values they hold in NEW (over all lines of each side, so a setting
that varies with the experiments, such as the autocast dtype, differs only where the two
sides' experiments do). Where a line ran (`cpu_affinity`) is not a setting and is left out.

The engine counts each file's distinct settings as it parses the file (every valid line,
one naming no model too; `reports.read.engine.settings_of`), and the reports' cache keeps
them: only those few distinct objects are decoded here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from reports.read.columnar import Engine
from reports.read.engine import FileScan

SETTINGS_KEY = "torch_settings"
#: Where a line ran rather than how: not compared (child/settings.py PLACEMENT_KEYS).
PLACEMENT_KEYS = frozenset({"cpu_affinity"})


@dataclass(frozen=True)
class SettingDifference:
    """One setting and the distinct values its lines hold on each side (as JSON text; a
    side whose lines lack it reads "-")."""

    name: str
    base: tuple[str, ...]
    new: tuple[str, ...]


def settings_values(scans: Iterable[FileScan]) -> tuple[dict[str, set[str]], int]:
    """Each setting's distinct values over the lines of the files, and how many lines held
    settings."""
    values: dict[str, set[str]] = {}
    lines = 0
    for scan in scans:
        if scan.settings is None:
            raise ValueError(f"{scan.path}: read without its settings (Engine(settings=True) reads them)")
        for text, count in scan.settings:
            settings = json.loads(text)
            if not isinstance(settings, dict):
                continue
            lines += count
            for name, value in settings.items():
                if name not in PLACEMENT_KEYS:
                    values.setdefault(name, set()).add(json.dumps(value, sort_keys=True))
    return values, lines


def differences(base: Sequence[FileScan], new: Sequence[FileScan]) -> Optional[list[SettingDifference]]:
    """The settings whose values differ between BASE's lines and NEW's, by name; None where
    either side holds no settings (lines older than the record)."""
    base_values, base_lines = settings_values(base)
    new_values, new_lines = settings_values(new)
    if not (base_lines and new_lines):
        return None
    found = []
    for name in sorted(set(base_values) | set(new_values)):
        theirs, ours = base_values.get(name, set()), new_values.get(name, set())
        if theirs != ours:
            found.append(SettingDifference(name, tuple(sorted(theirs)) or ("-",),
                                           tuple(sorted(ours)) or ("-",)))
    return found


def settings_differences(base: Sequence[Path], new: Sequence[Path],
                         cache_dir: Optional[Path] = None) -> Optional[list[SettingDifference]]:
    """`differences` between results files (or folders of them), read by a private engine."""
    with Engine(cache_dir) as engine:
        return differences(engine.add(base), engine.add(new))
