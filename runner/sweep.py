"""Run a plan: one child per experiment, one line per experiment, a progress bar.

Several runners may share the results file: each experiment is claimed first
(runner/claims.py), skipped when the results hold it already, waited for when another
live runner runs it, and taken over when that runner is gone. A runner ends when every
experiment of its plan is recorded, by itself or by others.
"""

from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from typing import Any, Optional

from tqdm import tqdm

from core.schema import Status, stack_label_of, timed_values
from models.base import Suite
from runner.claims import Claims, ClaimStatus
from runner.executor import ExperimentExecutor
from runner.matrix import Plan, PlannedExperiment

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    """The lines this sweep wrote, in order, and what other runners did meanwhile."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    #: Experiments of the plan that other runners recorded while this one ran.
    recorded_elsewhere: int = 0
    #: Lines left out because another runner recorded the experiment first.
    left_out: int = 0
    #: Claims of runners that were gone, taken over by this one.
    taken_over: int = 0


def run_plan(
    plan: Plan,
    suite: Suite,
    executor: ExperimentExecutor,
    claims: Claims,
    report: SweepReport,
    show_progress: bool = True,
    no_skip: bool = False,
) -> SweepReport:
    """Run every planned experiment no other runner records, appending each line as soon
    as it exists.

    `report` is filled as lines are written, so a caller that catches KeyboardInterrupt
    still knows what was finished.
    """
    pending = list(plan.experiments)
    waiting_told = False
    with claims, tqdm(
        total=len(pending), unit="exp", disable=not show_progress, dynamic_ncols=True
    ) as bar:
        while pending:
            busy = []
            for planned in pending:
                status, holder = claims.claim(planned.fingerprint)
                if status is ClaimStatus.BUSY:
                    busy.append(planned)
                    continue
                if status is ClaimStatus.CLAIMED:
                    bar.set_postfix_str(describe(planned), refresh=True)
                    _run_claimed(planned, suite, executor, claims, report, no_skip)
                bar.update(1)
            if busy and not waiting_told:
                log.info("%d experiment(s) are being run by other runners; waiting for them",
                         len(busy))
                waiting_told = True
            if busy:
                claims.wait()
            pending = busy
    report.recorded_elsewhere = claims.counts.recorded_elsewhere
    report.left_out = claims.counts.left_out
    report.taken_over = claims.counts.taken_over
    return report


def _run_claimed(planned: PlannedExperiment, suite: Suite, executor: ExperimentExecutor,
                 claims: Claims, report: SweepReport, no_skip: bool = False) -> None:
    try:
        reason = None if no_skip else suite.skip_reason(planned.model.model_name,
                                                        planned.experiment.test)
        if reason:
            line = executor.skipped_line(planned, reason).to_dict()
        else:
            line = executor.run(planned).to_dict()
        written = claims.record(planned.fingerprint, line)
    finally:
        claims.release(planned.fingerprint)
    if not written:
        return
    report.lines.append(line)
    if line["status"] == Status.FAILED.value:
        log.warning("%s failed: %s", describe(planned),
                    line["metrics"].get("error", "").splitlines()[0:1])


def describe(planned: PlannedExperiment) -> str:
    experiment = planned.experiment
    text = f"{planned.model.model_name} {experiment.accelerator} {planned.label} {experiment.test}"
    if experiment.precision != "fp32":
        text += f" {experiment.precision}"
    return text


def median_iteration_time(line: dict[str, Any]) -> Optional[float]:
    """The median of the timed runs (the cold-start entry left out)."""
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
