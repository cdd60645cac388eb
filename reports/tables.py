"""The report as plain tables of strings, shared by the text, Markdown and HTML renderers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from reports.aggregate import ConfigSummary, Report, Row
from reports.compare import Comparison
from reports.score import Score


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]]
    # Per row: a CSS class for the HTML renderer ('' for none).
    row_classes: Optional[list[str]] = None


def fmt_time(seconds: Optional[float]) -> str:
    """Seconds as ms with 3 significant digits, '-' for None."""
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def fmt_ratio(value: Optional[float], suffix: str = "x") -> str:
    return "-" if value is None else f"{value:.2f}{suffix}"


def fmt_bytes(value: Optional[int]) -> str:
    if value is None:
        return "-"
    return f"{value / 2**20:.1f} MiB"


def fmt_count(value: Optional[float], covered: int, total: int) -> str:
    return "-" if value is None else f"{value} ({covered}/{total})"


def _interval(row: Row) -> str:
    interval = row.record.interval
    if interval is None or len(row.record.per_iter_times) < 2:
        return "-"
    return f"{fmt_time(interval.low)} .. {fmt_time(interval.high)} ({interval.coverage:.0%})"


ROW_HEADERS = [
    "model", "configuration", "batch", "status", "verification", "median/iter", "interval",
    "repeats", "speedup", "cold start", "compile", "peak memory", "mem ratio", "warnings",
]


def row_cells(row: Row) -> list[str]:
    record = row.record
    memory = fmt_bytes(record.peak_memory)
    if record.memory_kind:
        memory += f" ({record.memory_kind})"
    return [
        record.model_label,
        record.config.label,
        "-" if record.batch_size is None else str(record.batch_size),
        record.status,
        record.verification_code,
        fmt_time(record.median_time),
        _interval(row),
        str(len(record.per_iter_times)),
        fmt_ratio(row.speedup) + (" (paired)" if row.speedup_method == "paired" else ""),
        fmt_time(record.cold_start_time),
        fmt_time(record.compile_time),
        memory if record.peak_memory else "-",
        fmt_ratio(row.compression_ratio),
        "; ".join(row.warnings),
    ]


def _covered(value: Optional[float], text: str, covered: int, total: int) -> str:
    return "-" if value is None else f"{text} ({covered}/{total})"


def pass_rate_cell(summary: ConfigSummary) -> str:
    """'100% (3/3)' over the verified experiments; 'not verified' when none was."""
    rate = summary.pass_rate
    return "not verified" if rate is None else f"{rate:.0%} ({summary.accurate}/{summary.judged})"


def compression_cell(summary: ConfigSummary) -> str:
    counted = summary.counted
    if summary.compression_ratio is None:
        return summary.memory_note or "-"
    return f"{fmt_ratio(summary.compression_ratio)} ({summary.compression_models}/{counted})"


def summary_cells(summary: ConfigSummary) -> list[str]:
    counted = summary.counted
    return [
        summary.config.label,
        pass_rate_cell(summary),
        str(summary.unverified),
        _covered(summary.geomean_speedup, fmt_ratio(summary.geomean_speedup), summary.speedup_models, counted),
        _covered(summary.mean_compile_time, fmt_time(summary.mean_compile_time), summary.compile_models, counted),
        compression_cell(summary),
        str(summary.skipped),
    ]


SUMMARY_HEADERS = ["configuration", "pass rate (verified)", "unverified", "geomean speedup", "mean compile",
                   "mem compression", "skipped"]


def report_tables(report: Report) -> list[Table]:
    summary = Table(
        title=f"Configurations (speedup and memory against {report.baseline})",
        headers=SUMMARY_HEADERS,
        rows=[summary_cells(s) for s in report.summaries],
    )
    rows = Table(
        title="Experiments",
        headers=ROW_HEADERS,
        rows=[row_cells(r) for r in report.rows],
        row_classes=["warn" if r.warnings else "" for r in report.rows],
    )
    warnings = Table(
        title="Warnings",
        headers=["model", "configuration", "warning"],
        rows=[[row.record.model_label, row.record.config.label, text] for row, text in report.warnings],
    )
    return [summary, rows, warnings]


def comparison_tables(comparison: Comparison) -> list[Table]:
    rows = []
    for change in comparison.changes:
        rows.append([
            change.base.model_label,
            change.base.config.label,
            fmt_time(change.base.median_time),
            fmt_time(change.new.median_time),
            "-" if change.change is None else f"{change.change:+.1%}",
            "-" if change.p_value is None else f"{change.p_value:.3f}",
            change.verdict,
            change.reason,
        ])
    return [Table(
        title="Changes (NEW against BASE)",
        headers=["model", "configuration", "base median", "new median", "change", "p", "verdict", "note"],
        rows=rows,
    )]


def score_tables(result: Score) -> list[Table]:
    return [Table(
        title=f"Left out of the score ({len(result.left_out)})",
        headers=["experiment", "reason"],
        rows=[[item.experiment, item.reason] for item in result.left_out],
    )]
