"""Turning what happened to an experiment's children into its results line."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from core.config import RunSettings
from core.files.strict_json import non_finite_numbers, without_non_finite_numbers
from core.contract import ChildResult
from core.schema import FailureKind, ResultLine, Status, Verdict, VerificationCode, bounded
from runner.plan.matrix import PlannedExperiment
from runner.run.process.supervision import ChildOutcome, describe_exit


@dataclass(frozen=True)
class SweepInfo:
    """What every line of one runner invocation shares.

    `timestamp` is the sweep's start (or --timestamp), as PyTorch/XLA's runner writes it;
    `accelerator_models` names each accelerator's device as the parent's probe knows it,
    for lines whose child never reported one (skipped, failed early)."""

    run_id: str
    command: str = ""
    timestamp: float = field(default_factory=time.time)
    accelerator_models: Mapping[str, Optional[str]] = field(default_factory=dict)


def new_line(settings: RunSettings, sweep: SweepInfo, planned: PlannedExperiment,
             **fields) -> ResultLine:
    """A line for `planned` with this sweep's identity and timestamp."""
    if fields.get("accelerator_model") is None:
        fields["accelerator_model"] = sweep.accelerator_models.get(
            planned.experiment.accelerator)
    return ResultLine(
        model=planned.model, experiment=planned.experiment, settings=settings,
        stack_label=planned.label, experiment_id=planned.experiment_id,
        run_id=sweep.run_id, command=sweep.command,
        timestamp=sweep.timestamp, **fields)


def skipped_line(settings: RunSettings, sweep: SweepInfo, planned: PlannedExperiment,
                 reason: str) -> ResultLine:
    """The line of an experiment its suite says cannot run."""
    return new_line(settings, sweep, planned, status=Status.SKIPPED,
                         verification_code=VerificationCode.VERIFIER_SKIPPED,
                         skip_reason=reason)


def outcome_succeeded(outcome: ChildOutcome) -> bool:
    """The child ended on its own with an OK result, within its time and memory."""
    return (outcome.result is not None and outcome.result.status is Status.OK
            and not outcome.timed_out and not outcome.memory_exceeded)


def line_from_outcome(settings: RunSettings, sweep: SweepInfo, planned: PlannedExperiment,
                      outcome: ChildOutcome) -> ResultLine:
    """The results line for a child's outcome, success or any kind of failure."""
    result = outcome.result or ChildResult()
    metrics, summary = dict(result.metrics), dict(result.summary)
    peak = max(outcome.peak_tree_rss_bytes, int(summary.get("child_max_rss_bytes", 0)))
    if peak:
        summary["peak_host_memory_bytes"] = peak
    summary["wall_time"] = outcome.wall_seconds
    if settings.compile_cache:
        # The compile figures are then a warm cache's, not a cold start's.
        summary["compile_cache"] = settings.compile_cache
    common = dict(environment=result.environment, batch_size_used=result.batch_size_used,
                  accelerator_model=result.accelerator_model, summary=summary,
                  workload=result.workload)
    if outcome.result is not None and result.status is Status.SKIPPED:
        return new_line(settings, sweep, planned, status=Status.SKIPPED, metrics=metrics,
                             verification_code=VerificationCode.VERIFIER_SKIPPED,
                             skip_reason=result.skip_reason, **common)
    succeeded = outcome_succeeded(outcome)
    if not succeeded:
        metrics["error"] = failure_text(outcome)
    line = new_line(
        settings, sweep, planned, status=Status.OK if succeeded else Status.FAILED, metrics=metrics,
        verification_code=(VerificationCode.VERIFIER_SKIPPED if succeeded
                           else VerificationCode.VERIFIER_DIDNT_RUN),
        notes=list(result.notes) + (outcome.notes if succeeded else []),
        failure_kind=(None if succeeded else FailureKind.INFRASTRUCTURE
                      if (outcome.infrastructure_failure and outcome.result is None)
                      or _host_cause(result) else FailureKind.EXPERIMENT), **common)
    if result.verdict is not None:
        line.apply_verdict(result.verdict)
    return line


def _host_cause(result: ChildResult) -> Optional[str]:
    """Why a failed child's exception is the host's failure (child/host_failures.py)."""
    if result.status is Status.FAILED and result.error is not None:
        return result.error.host_cause
    return None


def verdict_of(verification: ChildOutcome) -> Verdict:
    """The verification child's verdict, or VERIFIER_DIDNT_RUN with what happened."""
    if verification.result is not None and verification.result.verdict is not None:
        return verification.result.verdict
    return Verdict.didnt_run(failure_text(verification))


def failure_text(outcome: ChildOutcome) -> str:
    """A bounded, readable account: what happened, the exception, the output's tail."""
    result = outcome.result
    parts = list(outcome.notes)
    if result is not None and result.status is Status.FAILED and result.error is not None:
        parts.append(f"the experiment raised {result.error.exception}")
        if result.error.host_cause:
            parts.append(f"a failure of the host, not of the experiment: "
                         f"{result.error.host_cause} (resume runs it again)")
        if result.error.traceback:
            parts.append("traceback:\n" + bounded(result.error.traceback, 1500))
    elif outcome.infrastructure_failure and result is None:
        parts.append(f"the child was lost: {outcome.infrastructure_failure} (a failure of the "
                     "runner's infrastructure, not of the experiment: resume runs it again)")
    elif not outcome.timed_out and not outcome.memory_exceeded:
        parts.append(describe_exit(outcome.returncode, outcome.out_of_memory))
    if outcome.output_tail:
        parts.append("last output of the child:\n" + outcome.output_tail)
    return bounded("\n".join(parts))


def strict_line(line: dict[str, Any]) -> dict[str, Any]:
    """`line` as strict JSON can hold it (the results file's writer refuses anything else):
    a figure that came out NaN or infinite (a computation overflowed; each is bounded at its
    source, this is the last guard) is written as null, and a note names it, so the line is
    never lost to it."""
    found = non_finite_numbers(line)
    if not found:
        return line
    kept = without_non_finite_numbers(line)
    kept["notes"] = [*(kept.get("notes") or []), *(
        f"{where} came out as {value}, which is no JSON number; it is written as null"
        for where, value in found)]
    return kept
