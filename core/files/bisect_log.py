"""The bisect log: every step of an `experiment-runner bisect`, one JSON object a line.

It lies beside the results file whose lines the bisection measured (`log_path`), so that the
same command finds it again and resumes, and `report` draws the points with their verdicts.
Each entry names its `event`:

- `start`: what is bisected (`kind`: commits or versions; `points`: their labels in order,
  the good end first, the bad end last) and how it is judged (`metric`, `threshold`);
- `round`: a round of the search and the points it measures at once;
- `setup`: a point whose worktree or environment could not be made (`reason`);
- `measured`: a point's sweep ended (`attempt` 0, then one per measurement again, with its
  `processes`);
- `verdict`: a point judged (`verdict`: good, bad, inconclusive or skipped; `reason`;
  `figures`: each experiment's figure with its interval);
- `answer`: the first bad point, the last good one and what was skipped between them.

A torn last line (a bisection killed while writing) is ignored.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

#: What the log's name adds to the results file's stem (results.jsonl: results.bisect.log).
LOG_SUFFIX = ".bisect.log"
LOG_FORMAT_VERSION = 1

START, ROUND, SETUP, MEASURED, VERDICT, ANSWER = (
    "start", "round", "setup", "measured", "verdict", "answer")
GOOD, BAD, INCONCLUSIVE, SKIPPED = "good", "bad", "inconclusive", "skipped"


def log_path(results_path: Path) -> Path:
    """The bisect log of a results file: results.jsonl -> results.bisect.log beside it."""
    return results_path.with_name(results_path.stem + LOG_SUFFIX)


def append_entry(path: Path, entry: Mapping[str, Any]) -> None:
    """Append one entry and make it durable before returning."""
    text = json.dumps(dict(entry), sort_keys=True, allow_nan=False) + "\n"
    with open(path, "a", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())


def read_entries(path: Path) -> list[dict[str, Any]]:
    """Every entry of the log ([] when there is none); lines that are not JSON objects
    (a torn last line) are left out."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    entries = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("event"), str):
            entries.append(entry)
    return entries
