"""The settings that differ between two results files, for `experiment-runner compare`.

Each line records the numeric and runtime settings in force while it timed under
`environment.torch_settings` (docs/settings.md). A setting differs when the values its lines
hold in BASE are not the values they hold in NEW (over all lines of each side, so a setting
that varies with the experiments, such as the autocast dtype, differs only where the two
sides' experiments do). Where a line ran (`cpu_affinity`) is not a setting and is left out.
`compare` names those of the experiments it compared only (`settings_of_lines`): lines of
experiments only one side holds say nothing about the changes it judged.

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
from reports.read.engine import ID_STRIDE, FileScan

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
    counted = []
    for scan in scans:
        if scan.settings is None:
            raise ValueError(f"{scan.path}: read without its settings (Engine(settings=True) reads them)")
        counted.extend(scan.settings)
    return _values(counted)


def settings_of_lines(engine: Engine, ids: Iterable[Optional[int]]) -> list[tuple[str, int]]:
    """The distinct settings (JSON text) of the lines with these ids (`Record.line_id`),
    and how many of them hold each. The files must have been read with their settings."""
    by_file: dict[int, list[int]] = {}
    for identifier in ids:
        if identifier is not None:
            by_file.setdefault(int(identifier) // ID_STRIDE, []).append(int(identifier) % ID_STRIDE)
    counts: dict[str, int] = {}
    for index, ordinals in by_file.items():
        scan = engine.files[index]
        for text, count in engine.con.execute(
                f"SELECT settings, count(*) FROM {scan.relation} WHERE settings IS NOT NULL "
                f"AND ord IN (SELECT unnest(?::BIGINT[])) GROUP BY settings", [ordinals]).fetchall():
            counts[text] = counts.get(text, 0) + int(count)
    return sorted(counts.items())


def _values(counted: Iterable[tuple[str, int]]) -> tuple[dict[str, set[str]], int]:
    values: dict[str, set[str]] = {}
    lines = 0
    for text, count in counted:
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
    return _differences(settings_values(base), settings_values(new))


def differences_between(base: list[tuple[str, int]], new: list[tuple[str, int]]) -> Optional[list[SettingDifference]]:
    """`differences` between two sets of lines' settings (`settings_of_lines`)."""
    return _differences(_values(base), _values(new))


def _differences(base: tuple[dict[str, set[str]], int], new: tuple[dict[str, set[str]], int]
                 ) -> Optional[list[SettingDifference]]:
    (base_values, base_lines), (new_values, new_lines) = base, new
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
