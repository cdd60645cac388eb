"""CSV: one row per model and configuration, raw numbers (seconds, bytes)."""

from __future__ import annotations

from typing import Optional

from core.columns import ConfigColumn, shown_columns
from core.measures import Measure, measures
from reports.analyse.aggregate import Report
from reports.render.csv_writer import FORMULA_STARTS, text_cell, write_csv  # noqa: F401 - part of this module's interface


def _config_headers() -> list[str]:
    """The configuration's columns as tables show them (core.columns), the batch size (of
    each experiment) after those with a closed set of values."""
    headers = []
    for column in shown_columns():
        if "batch_size" not in headers and not (column.bare or column.closed):
            headers.append("batch_size")
        headers.append(column.name)
    return headers if "batch_size" in headers else headers + ["batch_size"]


_CONFIG_COLUMNS: dict[str, ConfigColumn] = {column.name: column for column in shown_columns()}

#: The measured figures the CSV holds (core.measures), each a column.
_FIGURES: tuple[Measure, ...] = tuple(m for m in measures() if m.csv_column)

CSV_FIELDS = [
    "suite", "model", "configuration", *_config_headers(), "status", "verification_code", "repeats", "median_time_s",
    "interval_low_s", "interval_high_s", "interval_coverage", "baseline", "baseline_median_time_s",
    "speedup", "speedup_method", "compression_ratio", *(m.csv_column for m in _FIGURES),
    "run_id", "fingerprint", "warnings", "error",
]


def _num(value: Optional[float]) -> str:
    return "" if value is None else repr(value)


def _figure(value: object, measure: Measure) -> object:
    """A figure as the CSV holds it: raw numbers, flags as yes or blank, text as it is."""
    if measure.kind is bool:
        return "yes" if value else ""
    if measure.kind is int:
        return "" if value is None else str(value)
    return _num(value) if measure.kind is float else value


#: The columns of numbers (written by `_num` or str of an int): every other one is text.
NUMBER_FIELDS = frozenset({
    "batch_size", "repeats", "median_time_s", "interval_low_s", "interval_high_s",
    "interval_coverage", "baseline_median_time_s", "speedup", "compression_ratio",
    *(m.csv_column for m in _FIGURES if m.kind in (int, float))})
def render_csv(report: Report) -> str:
    return write_csv(CSV_FIELDS, ([row[name] for name in CSV_FIELDS] for row in _rows(report)),
                     numbers=NUMBER_FIELDS)


def _rows(report: Report):
    for row in report.rows:
        r = row.record
        c = r.config
        yield ({
            "suite": r.suite, "model": r.model, "configuration": c.label,
            **{name: _CONFIG_COLUMNS[name].shown(value) for name, value in c},
            "batch_size": "" if r.batch_size is None else str(r.batch_size), "status": r.status, "verification_code": r.verification_code,
            "repeats": len(r.per_iter_times), "median_time_s": _num(r.median_time),
            "interval_low_s": _num(r.interval.low if r.interval else None),
            "interval_high_s": _num(r.interval.high if r.interval else None),
            "interval_coverage": _num(r.interval.coverage if r.interval else None),
            "baseline": report.baseline,
            "baseline_median_time_s": _num(row.baseline.median_time if row.baseline else None),
            "speedup": _num(row.speedup), "speedup_method": row.speedup_method,
            "compression_ratio": _num(row.compression_ratio),
            **{m.csv_column: _figure(r.figure(m.name), m) for m in _FIGURES},
            "run_id": r.run_id, "fingerprint": r.fingerprint, "warnings": "; ".join(row.warnings),
            "error": r.error,
        })
