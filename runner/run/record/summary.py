"""What a sweep prints when it ends: one row per requested experiment, then where to look next.

The table holds every experiment the command asked for, in the plan's order (model by model,
configurations in the matrix's order), so two runs of one command print their rows in the
same order, and a resumed run shows the rows it read back from the results file beside the
new ones. Its figures are those a user of PyTorch's dynamo harness looks for:

- median/iter: the line's figure (core.figures.median_time);
- speedup: eager's time over this stack's, from eager timed interleaved in the same child
  (`summary.paired_speedup`) where the line has it, else from the eager line of the same
  model and configuration in the same results; none for eager itself;
- cold start: the first iteration, compilation included (`summary.cold_start_time`);
- timings: `ok`, or `unreliable` with the short form of each reason the line gives
  (`summary.unreliable_reasons`, docs/timing.md).

Below it: how many lines are unreliable, what was recorded, the command that makes the
reports, and where the files asked for by observability flags (--dump-hlo, profiles) went.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from core.config import RunSettings, fingerprint, fingerprint_of_line
from core.figures import median_time
from core.schema import Status
from core.text import printable
import observers
from runner.plan.matrix import PlannedExperiment, eager_baseline

#: Codes that say the verifier was not asked or could not run: no verification column for them.
UNJUDGED_CODES = frozenset({"VERIFIER_SKIPPED", "VERIFIER_DIDNT_RUN"})
#: "process 2: the timed runs vary ..." (runner/run/process/processes.py) names the timing process.
_PROCESS_PREFIX = re.compile(r"^process \d+: ")


@dataclass(frozen=True)
class SummaryRow:
    """One requested experiment and its line (None: not recorded, e.g. another runner's)."""

    planned: PlannedExperiment
    line: Optional[Mapping[str, Any]]
    #: Written by this sweep, not read back from an earlier run.
    new: bool
    speedup: Optional[float] = None


def lines_by_fingerprint(lines: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The last line of each experiment in `lines` (a retried one replaces its failure)."""
    found: dict[str, Mapping[str, Any]] = {}
    for line in lines:
        key = fingerprint_of_line(line)
        if key is not None:
            found[key] = line
    return found


def _summary(line: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    summary = (line or {}).get("summary")
    return summary if isinstance(summary, dict) else {}


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(value)


def _ran(line: Optional[Mapping[str, Any]]) -> bool:
    return bool(line) and line.get("status") == Status.OK.value and (median_time(line) or 0) > 0


def speedup_of(planned: PlannedExperiment, line: Optional[Mapping[str, Any]],
               lines: Mapping[str, Mapping[str, Any]]) -> Optional[float]:
    """Eager's time over this experiment's: paired where the line has it, else from the
    eager line of the same model and configuration; None for eager or without a figure."""
    if not _ran(line) or planned.experiment.stack == "eager":
        return None
    paired = _summary(line).get("paired_speedup")
    if isinstance(paired, dict):
        value = _number(paired.get("speedup"))
        if value is not None and value > 0:
            return value
    baseline = eager_baseline(planned)
    if baseline is None:
        return None
    base_line = lines.get(fingerprint(baseline.model, baseline.experiment))
    if not _ran(base_line):
        return None
    return median_time(base_line) / median_time(line)


def build_rows(requested: Sequence[PlannedExperiment], lines: Mapping[str, Mapping[str, Any]],
               new: Iterable[str]) -> list[SummaryRow]:
    """A row per requested experiment, in the plan's order; `new` holds the fingerprints of
    the lines this sweep wrote."""
    written = set(new)
    rows = []
    for planned in requested:
        key = planned.fingerprint
        line = lines.get(key)
        rows.append(SummaryRow(planned, line, key in written, speedup_of(planned, line, lines)))
    return rows


def short_reason(reason: str) -> str:
    """A reason of `summary.unreliable_reasons` in a few words: 'varies 46%',
    'contention 56%', 'slow period 1.50x'; else its first clause."""
    text = _PROCESS_PREFIX.sub("", reason.strip())
    patterns = (
        (r"^the timed runs vary by (\S+%)", "varies {}"),
        (r"^contention through shared physical cores\D*(\d+%)", "SMT siblings busy {}"),
        (r"^contention: other processes used (\d+%)", "contention {}"),
        (r"^slow period: .*? ran ([\d.]+x)", "slow period {}"),
        (r"^slow period: (\d+%) of the timed runs", "slow period, {} of runs slow"),
    )
    for pattern, shown in patterns:
        match = re.search(pattern, text)
        if match:
            return shown.format(match.group(1))
    return re.split(r"[:;(]", text, maxsplit=1)[0].strip()[:40]


def timings_cell(line: Optional[Mapping[str, Any]]) -> str:
    """'ok', or 'unreliable: <short reasons>'; '-' for a line without timings."""
    if not _ran(line):
        return "-"
    summary = _summary(line)
    if not summary.get("unreliable"):
        return "ok"
    reasons = summary.get("unreliable_reasons")
    if not isinstance(reasons, list):
        reasons = [summary["unreliable_reason"]] if summary.get("unreliable_reason") else []
    shown = list(dict.fromkeys(short_reason(str(reason)) for reason in reasons))
    return "unreliable" + (f": {', '.join(shown)}" if shown else "")


def format_time(seconds: Optional[float]) -> str:
    """A duration as the table shows it: '0.2331 ms', '235.3 ms', '11.3 s'."""
    if seconds is None:
        return "-"
    if seconds >= 1.0:
        return f"{seconds:.3g} s"
    return f"{seconds * 1e3:.4g} ms"


def _status(row: SummaryRow) -> str:
    if row.line is None:
        return "not recorded"
    return str(row.line.get("status", "?"))


def format_table(rows: Sequence[SummaryRow]) -> str:
    """The rows as aligned text; a 'recorded' column when some rows were read back from an
    earlier run, a verification column when the verifier judged any."""
    earlier = any(row.line is not None and not row.new for row in rows)
    verified = any(row.line is not None and row.line.get("verification_code") not in UNJUDGED_CODES
                   for row in rows)
    header = ["model", "accelerator", "stack", "test", "precision", "status", "median/iter",
              "speedup", "cold start", "timings"]
    header += ["verification"] * verified + ["recorded"] * earlier
    table = [header]
    for row in rows:
        experiment, line = row.planned.experiment, row.line
        cold = _number(_summary(line).get("cold_start_time")) if _ran(line) else None
        cells = [printable(row.planned.model.model_name), experiment.accelerator, row.planned.label,
                 experiment.test, experiment.precision, _status(row),
                 format_time(median_time(line) if _ran(line) else None),
                 f"{row.speedup:.2f}x" if row.speedup is not None else "-",
                 format_time(cold), timings_cell(line)]
        if verified:
            cells.append(str((line or {}).get("verification_code", "-")))
        if earlier:
            cells.append("-" if line is None else "now" if row.new else "earlier")
        table.append(cells)
    widths = [max(len(cells[i]) for cells in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()
                     for cells in table)


def reliability_note(rows: Sequence[SummaryRow]) -> Optional[str]:
    """How many rows' timings are flagged, and where the reasons are; None when none is."""
    timed = [row for row in rows if _ran(row.line)]
    flagged = [row for row in timed if _summary(row.line).get("unreliable")]
    if not flagged:
        return None
    return (f"{len(flagged)} of {len(timed)} timed experiment(s) are unreliable: their figures "
            "may be off by more than the differences between stacks (each line's "
            "summary.unreliable_reasons says why; docs/timing.md)")


def observed_files(settings: RunSettings, output_dir: Path,
                   lines: Iterable[Mapping[str, Any]]) -> list[str]:
    """For each observability flag given that writes files: where they went (the child
    folders, relative to the output folder, that hold them)."""
    found = []
    lines = list(lines)
    for observer in observers.all_observers():
        given = [flag.spelled(value) for flag in observer.flags
                 if (value := settings.observing(flag.name))]
        if not given or not observer.files:
            continue
        patterns = [re.sub(r"<[^>]+>", "*", pattern).rstrip("/") for pattern in observer.files]
        folders = []
        for line in lines:
            for folder in ((line.get("artifacts") or {}).values()):
                if any(any((output_dir / folder).glob(pattern)) for pattern in patterns):
                    folders.append(folder)
        if folders:
            shown = ", ".join(observer.files)
            found.append(f"{' '.join(given)}: {shown} in {len(folders)} experiment folder(s) "
                         f"under {output_dir}, e.g. {output_dir / folders[0]}")
    return found


def sweep_summary(requested: Sequence[PlannedExperiment], written: Sequence[Mapping[str, Any]],
                  recorded: Iterable[Mapping[str, Any]], results_path: Path, output_dir: Path,
                  settings: RunSettings, recorded_elsewhere: int = 0) -> str:
    """The text printed when a sweep ends: the table of every requested experiment (its
    line from this sweep, else from `recorded`, the results file's lines), then what was
    recorded, the report command and where observability files went."""
    lines = lines_by_fingerprint(recorded)
    lines.update(lines_by_fingerprint(written))
    rows = build_rows(requested, lines, (fingerprint_of_line(line) for line in written))
    out = []
    if rows:
        out.append(format_table(rows))
        note = reliability_note(rows)
        if note:
            out.append(note)
    failed = sum(1 for line in written if line.get("status") == Status.FAILED.value)
    earlier = sum(1 for row in rows if row.line is not None and not row.new)
    out.append(f"{len(written)} experiment(s) recorded in {printable(results_path)}"
               + (f"; {failed} failed" if failed else "")
               + (f"; {recorded_elsewhere} recorded by other runners" if recorded_elsewhere else "")
               + (f"; {earlier} read back from earlier runs" if earlier else ""))
    if rows:
        out.append(f"Reports (tables, plots, a dashboard): experiment-runner report "
                   f"{shlex.quote(str(results_path))}")
    out.extend(observed_files(settings, output_dir, [row.line for row in rows if row.line]))
    return "\n".join(out)
