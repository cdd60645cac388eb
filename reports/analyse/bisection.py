"""A bisection's points as its log holds them (core/files/bisect_log.py): each point of the
range in order, with its latest verdict, the reason and each experiment's figure."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from core.files.bisect_log import ANSWER, START, VERDICT, read_entries

#: How each metric's figures read: seconds, bytes, or a ratio.
METRIC_UNITS = {"latency": "s", "compile_time": "s", "peak_memory": "B", "speedup": "x"}


@dataclass
class PointStep:
    """One point of the range: its place, label and title, and its latest verdict."""

    index: int
    label: str
    title: str
    verdict: str = ""
    reason: str = ""
    round: Optional[int] = None
    figures: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class BisectSteps:
    kind: str
    metric: str
    points: list[PointStep]
    answer: Optional[dict[str, Any]] = None
    #: The threshold the points were judged by (a fraction: 0.07 is 7%), None where unlogged.
    threshold: Optional[float] = None


def bisect_steps(log_file: Path) -> Optional[BisectSteps]:
    """The steps of the bisection logged in `log_file`, or None when there is none."""
    entries = read_entries(log_file)
    start = next((e for e in entries if e["event"] == START), None)
    if start is None:
        return None
    labels = [str(label) for label in start.get("points", [])]
    titles = list(start.get("titles") or [""] * len(labels))
    points = [PointStep(i, label, str(titles[i] if i < len(titles) else ""))
              for i, label in enumerate(labels)]
    by_label = {p.label: p for p in points}
    answer = None
    for entry in entries:
        if entry["event"] == VERDICT and entry.get("point") in by_label:
            step = by_label[entry["point"]]
            step.verdict = str(entry.get("verdict", ""))
            step.reason = str(entry.get("reason", ""))
            step.round = entry.get("round")
            step.figures = [f for f in entry.get("figures", []) if isinstance(f, dict)]
        elif entry["event"] == ANSWER:
            answer = entry
    threshold = start.get("threshold")
    return BisectSteps(str(start.get("kind", "")), str(start.get("metric", "")), points, answer,
                       float(threshold) if isinstance(threshold, (int, float)) else None)
