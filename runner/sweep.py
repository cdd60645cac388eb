"""Run a plan: one child per experiment, one line per experiment, a progress bar."""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from tqdm import tqdm

from core.results_file import append_line
from core.schema import Status, stack_label_of, timed_values
from models.base import Suite
from runner.executor import ExperimentExecutor
from runner.matrix import Plan, PlannedExperiment

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    """The lines this sweep wrote, in order."""

    lines: list[dict[str, Any]] = field(default_factory=list)


def run_plan(
    plan: Plan,
    suite: Suite,
    executor: ExperimentExecutor,
    results_path: Path,
    report: SweepReport,
    show_progress: bool = True,
    no_skip: bool = False,
) -> SweepReport:
    """Run every planned experiment, appending each line as soon as it exists.

    `report` is filled as lines are written, so a caller that catches KeyboardInterrupt
    still knows what was finished. With `no_skip`, models the suite says cannot run a test
    run anyway (--no-skip).
    """
    with tqdm(
        total=len(plan.experiments), unit="exp", disable=not show_progress, dynamic_ncols=True
    ) as bar:
        for planned in plan.experiments:
            bar.set_postfix_str(describe(planned), refresh=True)
            reason = None if no_skip else suite.skip_reason(planned.model.model_name,
                                                            planned.experiment.test)
            if reason:
                line = executor.skipped_line(planned, reason).to_dict()
            else:
                line = executor.run(planned).to_dict()
            append_line(results_path, line)
            report.lines.append(line)
            if line["status"] == Status.FAILED.value:
                log.warning("%s failed: %s", describe(planned),
                            line["metrics"].get("error", "").splitlines()[0:1])
            bar.update(1)
    return report


def describe(planned: PlannedExperiment) -> str:
    experiment = planned.experiment
    text = f"{planned.model.model_name} {experiment.accelerator} {planned.label} {experiment.test}"
    if experiment.precision != "fp32":
        text += f" {experiment.precision}"
    return text


def median_iteration_time(line: dict[str, Any]) -> Optional[float]:
    times = timed_values(line, "per_iter_time")
    return statistics.median(times) if times else None


def format_summary(lines: list[dict[str, Any]]) -> str:
    """A short table: every experiment's status and median time per iteration."""
    rows = [("model", "accelerator", "stack", "test", "precision", "status", "median/iter", "verification")]
    for line in lines:
        experiment = line.get("experiment", {})
        median = median_iteration_time(line)
        label = stack_label_of(line)
        rows.append((
            line.get("model", {}).get("model_name", "?"),
            str(experiment.get("accelerator")),
            label,
            str(experiment.get("test")),
            str(experiment.get("precision")),
            line.get("status", "?"),
            f"{median * 1e3:.3f} ms" if median is not None else "-",
            line.get("verification_code", "?"),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows
    )
