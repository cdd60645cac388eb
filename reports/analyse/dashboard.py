"""The dashboard's data: everything the HTML page draws, as one JSON-ready dict.

The page (reports/render/render_html.py) embeds it and renders tables and charts from it with plain
JavaScript, so that filters and sorting work offline.
"""

from __future__ import annotations

import datetime
import math
from typing import Any, Optional, Sequence

from reports.analyse.aggregate import Report
from reports.analyse.bisection import METRIC_UNITS, BisectSteps
from reports.analyse.compare import Comparison, DEFAULT_GEOMEAN_THRESHOLD
from reports.analyse.history import History
from core.columns import LABELS_COLUMN, config_columns, shown_columns
from core.measures import Measure, measure_named, measures
from core.packages import PROBED_PACKAGES
from reports.read.load import RunInfo
from reports.read.record import ConfigKey

MAX_CHANGES = 50
#: A point of a bisection that no round measured (the page colours it apart).
NOT_MEASURED = "not measured"
#: Where a line of an older version kept a package's version at the top of its environment.
VERSION_KEYS = PROBED_PACKAGES


def _num(value: Optional[float]) -> Optional[float]:
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _iso(timestamp: float) -> str:
    if not timestamp:
        return ""
    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _versions(environment: dict[str, Any]) -> dict[str, str]:
    packages = environment.get("packages")
    versions = {str(k): str(v) for k, v in packages.items()} if isinstance(packages, dict) else {}
    for key in VERSION_KEYS:
        if key not in versions and isinstance(environment.get(key), (str, int, float)):
            versions[key] = str(environment[key])
    if isinstance(environment.get("python"), str):
        versions.setdefault("python", environment["python"])
    return versions


def _run_entry(run: RunInfo) -> dict[str, Any]:
    environment = run.environments[0] if run.environments else {}
    settings = environment.get("torch_settings")
    return {
        "id": run.run_id,
        "label": run.label,
        "first": _iso(run.first_timestamp),
        "last": _iso(run.last_timestamp),
        "lines": run.lines,
        "commands": run.commands,
        "versions": _versions(environment),
        "host": str(environment.get("host", "")),
        "platform": str(environment.get("platform", "")),
        "settings": {str(k): str(v) for k, v in settings.items()} if isinstance(settings, dict) else {},
        "devices": run.devices,
        "files": run.files,
        "environments": len(run.environments),
    }


def _config_entry(config: ConfigKey, baseline: str) -> dict[str, Any]:
    """A configuration as the page shows it: its label, each column's value (core.columns),
    and whether it is on the baseline's stack."""
    columns = {column.name: column for column in config_columns()}
    return {"label": config.label, **{name: columns[name].shown(value) for name, value in config},
            "baseline": config.stack == baseline}


def _figures() -> tuple[Measure, ...]:
    """The measured figures the page's rows hold (core.measures: those with a key)."""
    return tuple(m for m in measures() if m.data_key)


def figure_entries() -> list[dict[str, Any]]:
    """What the page knows of each figure its rows hold: its key in a row, its column's
    header (null: none), how it prints, and its note's key."""
    return [{"name": m.name, "key": m.data_key, "header": m.header, "prints": m.prints, "unit": m.unit,
             "note": measure_named(m.note).data_key if m.note else None, "noteMissing": m.note_missing,
             "lowerIsBetter": m.lower_is_better}
            for m in _figures()]


def _figure_value(record: Any, measure: Measure) -> Any:
    """A figure as a row of the page holds it (None where its `when` does not hold)."""
    value = record.figure(measure.name)
    if measure.when and not record.figure(measure.when):
        return None
    return _num(value) if measure.kind is float else value


def filters() -> list[str]:
    """The configuration columns the page filters on: every one of a value (core.columns:
    the label fields' combinations aside), as tables show them."""
    return [column.name for column in shown_columns() if column.name != LABELS_COLUMN]


def bisection_entry(steps: BisectSteps) -> dict[str, Any]:
    """A bisection as the page draws it: every point of the range in order, with its latest
    verdict (or "not measured") and its figure for each experiment judged, the figures of
    the experiments listed once in `experiments` and aligned with it (null: no figure)."""
    experiments: list[str] = []
    for point in steps.points:
        for figure in point.figures:
            name = str(figure.get("experiment", ""))
            if name not in experiments:
                experiments.append(name)
    points = []
    for point in steps.points:
        figures: list[Optional[dict[str, Any]]] = [None] * len(experiments)
        for figure in point.figures:
            figures[experiments.index(str(figure.get("experiment", "")))] = {
                "value": _num(figure.get("value")), "low": _num(figure.get("low")),
                "high": _num(figure.get("high")), "status": str(figure.get("status") or "")}
        points.append({"label": point.label, "title": point.title,
                       "verdict": point.verdict or NOT_MEASURED, "reason": point.reason,
                       "figures": figures})
    answer = steps.answer or {}
    return {
        "kind": steps.kind, "metric": steps.metric, "unit": METRIC_UNITS.get(steps.metric, ""),
        "threshold": _num(steps.threshold), "experiments": experiments, "points": points,
        "firstBad": answer.get("first_bad"), "lastGood": answer.get("last_good"),
        "skippedBetween": [str(label) for label in answer.get("skipped_between") or []],
        "problem": str(answer.get("problem") or ""),
    }


def build_payload(
    title: str,
    intro: list[str],
    report: Report,
    history: Optional[History] = None,
    changes: Optional[Comparison] = None,
    runs: Optional[list[RunInfo]] = None,
    bisections: Sequence[BisectSteps] = (),
) -> dict[str, Any]:
    """The JSON-ready data of the dashboard."""
    configs: list[ConfigKey] = []
    index: dict[ConfigKey, int] = {}

    def config_id(config: ConfigKey) -> int:
        if config not in index:
            index[config] = len(configs)
            configs.append(config)
        return index[config]

    for summary in report.summaries:
        config_id(summary.config)
    rows = []
    for row in report.rows:
        r = row.record
        rows.append({
            "m": r.model_label, "s": r.suite, "c": config_id(r.config), "bs": r.batch_size,
            "st": r.status, "v": r.verification_code, "med": _num(r.median_time),
            "lo": _num(r.interval.low) if r.interval and len(r.per_iter_times) > 1 else None,
            "hi": _num(r.interval.high) if r.interval and len(r.per_iter_times) > 1 else None,
            "cov": _num(r.interval.coverage) if r.interval and len(r.per_iter_times) > 1 else None,
            "n": len(r.per_iter_times), "sp": _num(row.speedup), "sm": row.speedup_method,
            "spc": row.speedup_counts,
            "ran": r.ran, "passed": r.passed, "ver": r.verified, "acc": r.accurate,
            "cr": _num(row.compression_ratio), "w": row.warnings, "run": r.run_id, "err": r.error,
            **{m.data_key: _figure_value(r, m) for m in _figures()},
        })
    payload: dict[str, Any] = {
        "title": title,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "baseline": report.baseline,
        "filters": filters(),
        "figures": figure_entries(),
        "notes": list(intro) + list(report.notes),
        "runs": [_run_entry(run) for run in (runs or [])],
        "rows": rows,
        "history": None,
        "changes": None,
        "bisections": [bisection_entry(steps) for steps in bisections],
    }
    if history is not None and history.points:
        payload["history"] = {
            "threshold": history.threshold,
            "alpha": history.alpha,
            "geomeanThreshold": DEFAULT_GEOMEAN_THRESHOLD,
            "points": [
                [p.run, config_id(p.config), p.suite, p.counted, p.skipped, p.verified, p.accurate,
                 p.failed, p.speedups, p.log_speedup, p.compiles, p.compile_sum, p.ratios, p.log_ratio]
                for p in history.points
            ],
            # (run, configuration) pairs that share no experiment with the configuration's
            # previous run: its history line breaks there (History.shared).
            "breaks": [[run, config_id(config)] for (run, config), shared in sorted(
                history.shared.items(), key=lambda item: (item[0][0], item[0][1])) if not shared],
            "transitions": [
                [t.run, config_id(t.config), t.suite, t.common, t.log_change, t.regressed, t.improved,
                 t.noise, t.newly_failing, t.fixed]
                for t in history.transitions
            ],
        }
    if changes is not None and changes.changes:
        ranked = sorted(
            changes.changes,
            key=lambda c: (c.verdict in ("newly failing", "fixed"),
                           abs(math.log(c.ratio)) if c.ratio else 0.0),
            reverse=True,
        )[:MAX_CHANGES]
        payload["changes"] = {
            "baseRun": changes.changes[0].base.run_id,
            "newRun": changes.changes[0].new.run_id,
            "threshold": changes.threshold,
            "alpha": changes.alpha,
            "items": [
                {"m": c.new.model_label, "s": c.new.suite, "c": config_id(c.new.config),
                 "base": _num(c.base.median_time), "new": _num(c.new.median_time),
                 "ratio": _num(c.ratio), "p": _num(c.p_value), "verdict": c.verdict, "note": c.reason}
                for c in ranked
            ],
        }
    payload["configs"] = [_config_entry(c, report.baseline) for c in configs]
    return payload
