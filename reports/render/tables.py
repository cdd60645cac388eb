"""The report as plain tables of strings, shared by the text, Markdown and HTML renderers."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

from core import measures as table
from core.measures import Measure, measure_named, shown_measures
from reports.analyse.aggregate import ConfigSummary, Report, Row
from reports.analyse.compare import DEFAULT_GEOMEAN_THRESHOLD, Comparison
from reports.analyse.history import History, geomean_change
from reports.read.load import RunInfo, format_time
from reports.read.record import ConfigKey
from reports.analyse.score import Score
from reports.analyse.settings_diff import SettingDifference


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


def fmt_flops(value: Optional[float]) -> str:
    """FLOPs of one iteration in GFLOP, '-' when not counted."""
    return "-" if value is None else f"{value / 1e9:,.4g} G"


def fmt_tflops(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3g}"


def _interval(row: Row) -> str:
    interval = row.record.interval
    if interval is None or len(row.record.per_iter_times) < 2:
        return "-"
    return f"{fmt_time(interval.low)} .. {fmt_time(interval.high)} ({interval.coverage:.0%})"


def fmt_percent(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.0%}"


def fmt_number(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4g}"


#: How a figure's value prints (core.measures.PRINTS); None prints as '-'.
PRINTS: dict[str, Callable[[Any], str]] = {
    table.TIME: fmt_time, table.BYTES: fmt_bytes, table.RATIO: fmt_ratio, table.PERCENT: fmt_percent,
    table.SIGNIFICANT: fmt_tflops, table.GIGA: fmt_flops, table.NUMBER: fmt_number,
    table.TEXT: lambda value: "-" if value is None else str(value),
    table.FLAG: lambda value: "yes" if value else "",
}


def figure_cell(record, measure: Measure) -> str:
    """A figure as tables show it: its value, with its note in parentheses (the percent
    of peak beside TFLOP/s); '-' where there is none, or where its `when` does not hold."""
    value = record.figure(measure.name)
    if value is None or value == "" or (measure.when and not record.figure(measure.when)):
        return "-"
    cell = PRINTS[measure.prints](value)
    if measure.note is not None:
        note = record.figure(measure.note)
        if note is not None and note != "":
            cell += f" ({PRINTS[measure_named(measure.note).prints](note)})"
        elif measure.note_missing:
            cell += f" ({measure.note_missing})"
    return cell


def throughput_cell(record) -> str:
    """Achieved TFLOP/s with its percent of the device's peak; 'no peak' where the device
    has none in the table; '-' without a FLOP count."""
    return figure_cell(record, measure_named("tflops"))


#: The experiments table's columns: the line's, the comparison's, then each figure with a
#: header (core.measures), then the warnings.
ROW_HEADERS = [
    "model", "configuration", "batch", "status", "verification", "median/iter", "interval",
    "repeats", "speedup", "mem ratio", *(m.header for m in shown_measures()), "warnings",
]


#: How a speedup was found: eager timed interleaved in the same process (paired), or the
#: baseline's own line against this one (unpaired: the machine may have changed between).
SPEEDUP_MARKS = {"paired": "paired", "baseline": "unpaired"}
#: The stack that compiles nothing: its cold start less its median is no compile time, and
#: the tables show none.
EAGER_STACK = "eager"
#: Figures that mean nothing for the eager stack (it compiles nothing).
_NOT_EAGER = ("compile_time",)


def speedup_cell(row: Row) -> str:
    """The speedup, marked with how it was found (`SPEEDUP_MARKS`)."""
    if row.speedup is None:
        return "-"
    mark = SPEEDUP_MARKS.get(row.speedup_method)
    return fmt_ratio(row.speedup) + (f" ({mark})" if mark else "")


def _figure_of_row(record, measure: Measure) -> str:
    if measure.name in _NOT_EAGER and record.config.stack == EAGER_STACK:
        return "-"
    return figure_cell(record, measure)


def row_cells(row: Row, said_once: frozenset[str] = frozenset()) -> list[str]:
    record = row.record
    return [
        record.model_label,
        record.config.label,
        "-" if record.batch_size is None else str(record.batch_size),
        record.status,
        record.verification_code,
        fmt_time(record.median_time),
        _interval(row),
        str(len(record.per_iter_times)),
        speedup_cell(row),
        fmt_ratio(row.compression_ratio),
        *(_figure_of_row(record, measure) for measure in shown_measures()),
        "; ".join(text for text in row.warnings if text not in said_once),
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
        "-" if summary.config.stack == EAGER_STACK else
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
        rows=[row_cells(r, report.said_once) for r in report.rows],
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
    tables = [Table(
        title="Changes (NEW against BASE)",
        headers=["model", "configuration", "base median", "new median", "change", "p", "verdict", "note"],
        rows=rows,
    )]
    if comparison.figures:
        tables.append(Table(
            title=f"Other figures that moved by more than {comparison.threshold:.0%} (NEW against BASE)",
            headers=["model", "configuration", "figure", "base", "new", "change", "verdict"],
            rows=[[moved.change.base.model_label, moved.change.base.config.label,
                   moved.measure.name, PRINTS[moved.measure.prints](moved.base),
                   PRINTS[moved.measure.prints](moved.new),
                   "-" if moved.ratio is None else f"{moved.ratio - 1:+.1%}",
                   "better" if moved.better else "worse"] for moved in comparison.figures],
            row_classes=["" if moved.better else "warn" for moved in comparison.figures]))
    return tables


def settings_table(differences: list[SettingDifference]) -> Table:
    """The settings whose recorded values differ between BASE and NEW (docs/settings.md)."""
    return Table(
        title=f"Settings that differ ({len(differences)})",
        headers=["setting", "base", "new"],
        rows=[[d.name, ", ".join(d.base), ", ".join(d.new)] for d in differences],
    )


def score_tables(result: Score) -> list[Table]:
    return [Table(
        title=f"Left out of the score ({len(result.left_out)})",
        headers=["experiment", "reason"],
        rows=[[item.experiment, item.reason] for item in result.left_out],
    )]


def runs_table(runs: list[RunInfo], limit: int = 12) -> Table:
    """Provenance: the latest runs, newest first."""
    rows = []
    for run in list(reversed(runs))[:limit]:
        environment = run.environments[0] if run.environments else {}
        packages = environment.get("packages") if isinstance(environment.get("packages"), dict) else {}
        torch = packages.get("torch") or environment.get("torch") or "-"
        rows.append([
            run.run_id or "(no run id)", format_time(run.first_timestamp), str(run.lines),
            ", ".join(run.devices) or "-", f"torch {torch}", str(environment.get("host", "-")),
            " | ".join(run.commands) or "-",
        ])
    title = f"Runs ({len(runs)}, newest first" + (f", latest {limit} shown)" if len(runs) > limit else ")")
    return Table(title=title, headers=["run", "started (UTC)", "lines", "devices", "versions", "host", "command"],
                 rows=rows)


def trend_table(history: History, last: int = 6) -> Table:
    """Geometric mean speedup per configuration over the latest runs, with each run's verdict."""
    runs = history.runs
    shown = list(range(max(0, len(runs) - last), len(runs)))
    by_point: dict[tuple[int, ConfigKey], list[float]] = {}
    for p in history.points:
        entry = by_point.setdefault((p.run, p.config), [0, 0.0])
        entry[0] += p.speedups
        entry[1] += p.log_speedup
    by_step: dict[tuple[int, ConfigKey], list] = {}
    for t in history.transitions:
        by_step.setdefault((t.run, t.config), []).append(t)
    rows = []
    for config in history.configs():
        cells = [config.label]
        for run in shown:
            n, total = by_point.get((run, config), (0, 0.0))
            value = fmt_ratio(math.exp(total / n)) if n else "-"
            steps = by_step.get((run, config), [])
            change = geomean_change(steps)
            flags = []
            if change is not None and change > 1 + DEFAULT_GEOMEAN_THRESHOLD:
                flags.append(f"time {change - 1:+.1%}")
            elif change is not None and change < 1 - DEFAULT_GEOMEAN_THRESHOLD:
                flags.append(f"time {change - 1:+.1%}")
            regressed = sum(t.regressed + t.newly_failing for t in steps)
            improved = sum(t.improved + t.fixed for t in steps)
            if regressed:
                flags.append(f"{regressed} regressed")
            if improved:
                flags.append(f"{improved} improved")
            if n and not history.joins_previous(run, config):
                # No experiment in common with the run before: not a step of one series.
                flags = ["not comparable: no experiment in common with the run before"]
            cells.append(value + (f" ({', '.join(flags)})" if flags else ""))
        rows.append(cells)
    headers = ["configuration"] + [f"{runs[i].run_id[:8] or '-'} {format_time(runs[i].first_timestamp)[:10]}" for i in shown]
    return Table(title=f"Trend: geometric mean speedup over the latest {len(shown)} runs "
                       f"(time change against each model's previous run)", headers=headers, rows=rows)


#: The Experiments table's columns on the terminal, before the figures' (core.measures: each
#: with a header) and the warnings' count: the CSV, Markdown and HTML hold them all (the
#: interval, the repeats, the memory ratio, each warning).
CONSOLE_COLUMNS = ("model", "configuration", "batch", "status", "median/iter", "speedup")
#: Headers the terminal shortens.
_CONSOLE_HEADERS = {"TFLOP/s (% peak)": "TFLOP/s (%)", "warnings": "warn"}
#: The widest a model or configuration cell is on the terminal.
CONSOLE_CELL = 36
#: Verification codes the terminal leaves out of the status (no verdict).
_NO_VERDICT = ("VERIFIER_SKIPPED", "VERIFIER_DIDNT_RUN")


def console_tables(tables: list[Table]) -> list[Table]:
    """The tables as the terminal shows them: the Experiments table narrowed to fit a
    terminal (`CONSOLE_COLUMNS` and the figures': the verdict joins the status, the
    speedup's mark is short, the warnings are counted, each listed in the Warnings table)."""
    return [_console_experiments(table) if table.title == "Experiments" else table for table in tables]


def _clip(text: str, width: int = CONSOLE_CELL) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _console_experiments(table: Table) -> Table:
    at = {header: index for index, header in enumerate(table.headers)}
    columns = (*CONSOLE_COLUMNS, *(m.header for m in shown_measures() if m.header in at), "warnings")
    rows = []
    for cells in table.rows:
        status, code = cells[at["status"]], cells[at["verification"]]
        speedup = cells[at["speedup"]].replace(" (paired)", " p").replace(" (unpaired)", " u")
        warnings = cells[at["warnings"]]
        values = {
            "model": _clip(cells[at["model"]]), "configuration": _clip(cells[at["configuration"]]),
            "status": status if code in _NO_VERDICT else f"{status} {code}",
            "speedup": speedup, "warnings": str(len(warnings.split("; "))) if warnings else "",
            "TFLOP/s (% peak)": cells[at["TFLOP/s (% peak)"]].replace(" (no peak)", ""),
        }
        rows.append([values.get(name, cells[at[name]]) if name in at or name in values else "-"
                     for name in columns])
    # A figure's column with no value in any row says nothing on the terminal.
    keep = [index for index, name in enumerate(columns)
            if name in CONSOLE_COLUMNS or name == "warnings" or any(row[index] not in ("-", "") for row in rows)]
    rows = [[row[index] for index in keep] for row in rows]
    headers = [_CONSOLE_HEADERS.get(columns[index], columns[index]) for index in keep]
    return Table(title="Experiments (speedup p: paired, eager timed in the same process; u: unpaired; "
                       "all columns: --csv, --html)",
                 headers=headers, rows=rows, row_classes=table.row_classes)
