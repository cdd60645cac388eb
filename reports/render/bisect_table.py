"""A bisection as a table: each point measured, in the range's order, with its verdict and
its figure drawn as a bar (the console's figure over the points)."""

from __future__ import annotations

from typing import Optional

from reports.analyse.bisection import METRIC_UNITS, BisectSteps
from reports.render.tables import Table

BAR_WIDTH = 30


def _value(value: Optional[float], unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value * 1e3:.4g} ms"
    if unit == "B":
        return f"{value / 2**20:.4g} MiB"
    return f"{value:.3g}{unit}"


def bisect_table(steps: BisectSteps) -> Table:
    """Each measured point with its verdict, figure, interval and a bar of its figure."""
    unit = METRIC_UNITS.get(steps.metric, "")
    measured = [p for p in steps.points if p.verdict]
    values = [f.get("value") for p in measured for f in p.figures
              if isinstance(f.get("value"), (int, float))]
    top = max(values) if values else None
    rows = []
    for point in measured:
        figures = point.figures or [{}]
        for figure in figures:
            value = figure.get("value")
            low, high = figure.get("low"), figure.get("high")
            interval = f"{_value(low, unit)} .. {_value(high, unit)}" if low is not None else "-"
            bar = "#" * max(1, round(BAR_WIDTH * value / top)) if value and top else ""
            rows.append([str(point.index), point.label, point.title[:40], point.verdict,
                         str(figure.get("experiment", "")), _value(value, unit), interval, bar,
                         point.reason[:100]])
    title = f"Bisection over {len(steps.points)} {steps.kind} ({steps.metric})"
    if steps.answer and steps.answer.get("first_bad"):
        title += f": first bad {steps.answer['first_bad']}, last good {steps.answer['last_good']}"
    return Table(title, ["#", "point", "title", "verdict", "experiment", steps.metric or "figure",
                         "interval", "figure over the points", "why"], rows)
