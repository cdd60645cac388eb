"""The results line: its fields, statuses and verification codes, for writers and readers.

One JSON object per line in the shape of PyTorch/XLA's runner (`model`, `experiment`,
`repeat`, `iterations_per_run`, `metrics`, `timestamp`, `verification_code`), plus our own
keys. The runner builds lines with `ResultLine`; the reports read them with the accessors
below, which tolerate lines of any age or shape.

As in PyTorch/XLA's runner, every value under `metrics` is a per-run list (its tools take
the min, median and max of each), except `metrics.error` (a string) on failed lines and
`"SKIP"` on skipped ones. Figures of the whole experiment (cold start, warm-up, peak memory,
graph counts, wall time...) are in the line's `summary`.

The per-run lists start with the cold-start run when there was a warm-up:
`summary.cold_start_entries` (1, or 0 with --warmup=0) leading entries hold the first
`iterations_per_run` warm-up iterations, compilation included, and the timed runs follow.
PyTorch/XLA's tools read compile time as the first entry less the steady state; our own
readers take the steady state from `timed_values`, which leaves those entries out.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from core.config import (
    REQUESTED_BATCH_SIZE,
    ExperimentConfig,
    ModelConfig,
    RunSettings,
    fingerprint,
)
from core.fields import SCHEMA_VERSION
# The readers of a line's timed runs and its figure live in core.figures (core.host.peaks uses
# them too); they are part of this module's interface.
from core.figures import (COLD_START_ENTRIES, cold_start_entries, median_time,  # noqa: F401
                          metrics_of, timed_values)
from core.host.peaks import throughput

MAX_ERROR_CHARS = 4000
#: `metrics.error` of a skipped line, as PyTorch/XLA's runner writes it.
SKIP_ERROR = "SKIP"


class Status(str, enum.Enum):
    """How an experiment ended."""

    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


class FailureKind(str, enum.Enum):
    """Whose failure a failed line records (`failure_kind`; lines before it: the experiment's).

    An infrastructure failure (a fork server lost, a Ray node or worker lost) says nothing
    about the experiment: resume runs it again."""

    EXPERIMENT = "experiment"
    INFRASTRUCTURE = "infrastructure"

    def __str__(self) -> str:
        return self.value


class VerificationCode(str, enum.Enum):
    """The codes of a line's `verification_code`, as PyTorch/XLA's runner defines them."""

    PASS = "PASS"
    FAIL = "FAIL"
    EAGER_FAILED = "EAGER_FAILED"
    EXCEPTION_RAISED = "EXCEPTION_RAISED"
    NONDETERMINISTIC_EAGER_RUN = "NONDETERMINISTIC_EAGER_RUN"
    VERIFIER_SKIPPED = "VERIFIER_SKIPPED"
    VERIFIER_DIDNT_RUN = "VERIFIER_DIDNT_RUN"

    def __str__(self) -> str:
        return self.value


#: Codes meaning the verifier ran and found the experiment's output wrong.
VERIFICATION_FAILED = frozenset({VerificationCode.FAIL.value, VerificationCode.EXCEPTION_RAISED.value})
#: Codes meaning the verifier did not judge the output (no verdict either way).
VERIFICATION_NOT_RUN = frozenset(
    {VerificationCode.VERIFIER_SKIPPED.value, VerificationCode.VERIFIER_DIDNT_RUN.value})


@dataclass(frozen=True)
class Verdict:
    """The outcome of a verification.

    `reason` says, for anything but a plain pass, which output or which error decided it;
    `details` holds JSON-ready numbers (errors, cosine, the failing path, the method).
    """

    code: VerificationCode
    reason: Optional[str] = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.code is VerificationCode.PASS

    def with_details(self, **extra: Any) -> "Verdict":
        """A copy with more details (existing keys are kept unless given again)."""
        return Verdict(self.code, self.reason, {**self.details, **extra})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: {"code", "reason", "details"}."""
        return {"code": self.code.value, "reason": self.reason, "details": dict(self.details)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Verdict":
        return cls(VerificationCode(data["code"]), data.get("reason"),
                   dict(data.get("details") or {}))

    @classmethod
    def skipped(cls, reason: str) -> "Verdict":
        """Verification was not asked for, or does not apply."""
        return cls(VerificationCode.VERIFIER_SKIPPED, reason)

    @classmethod
    def didnt_run(cls, reason: str) -> "Verdict":
        """The verification process ended without a verdict (crash, timeout)."""
        return cls(VerificationCode.VERIFIER_DIDNT_RUN, reason)


def bounded(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Keep the head and the tail of a long text, marking what was cut."""
    if len(text) <= limit:
        return text
    keep = limit // 2 - 20
    return f"{text[:keep]}\n... [{len(text) - 2 * keep} characters cut] ...\n{text[-keep:]}"


def error_headline(error: str) -> str:
    """The line of a failed line's `metrics.error` that says what happened: its first line
    (this runner writes what happened first, then the traceback and the child's last
    output, whose last line is any warning the child printed); for an error that is a
    bare Python traceback (PyTorch/XLA's runner's lines), its last line, the exception."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return ""
    return lines[-1] if lines[0].startswith("Traceback") else lines[0]


def _per_run_number(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def split_metrics(values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(per-run lists of numbers and `error`, everything else): what goes under `metrics` and
    what goes into `summary`. PyTorch/XLA's analyzer takes the min, median and max of every
    metric as floats, so lists of anything but numbers (None reads as NaN) go to the summary,
    and empty lists are dropped (it cannot take the median of nothing)."""
    per_run: dict[str, Any] = {}
    whole: dict[str, Any] = {}
    for name, value in values.items():
        if name == "error" and isinstance(value, str):
            per_run[name] = value
        elif isinstance(value, list) and all(_per_run_number(v) for v in value):
            if value:
                per_run[name] = value
        else:
            whole[name] = value
    return per_run, whole


@dataclass
class ResultLine:
    """One results line as the runner writes it.

    `metrics` holds per-run lists (anything else given there is moved to the summary);
    `summary` the figures of the whole experiment. `timestamp` is the sweep's (one per
    runner invocation, as PyTorch/XLA's tools group by it); `finished_at` is when this
    line was made. `experiment.batch_size` is the batch size used when the child reported
    one (else the requested one), and `experiment.requested_batch_size` the requested one.
    """

    model: ModelConfig
    experiment: ExperimentConfig
    settings: RunSettings
    status: Status
    verification_code: VerificationCode
    metrics: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    stack_label: str = ""
    accelerator_model: Optional[str] = None
    experiment_id: str = ""
    run_id: str = ""
    command: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    batch_size_used: Optional[int] = None
    skip_reason: Optional[str] = None
    verification_reason: Optional[str] = None
    verification_details: Optional[dict[str, Any]] = None
    #: Folders of the children, relative to the output folder, by role.
    artifacts: dict[str, str] = field(default_factory=dict)
    #: A failed line's kind of failure (written on failed lines only).
    failure_kind: Optional[FailureKind] = None
    #: What one iteration ran (parameters, inputs, mode, optimizer, FLOPs): None when the
    #: child never loaded the model.
    workload: Optional[dict[str, Any]] = None
    timestamp: float = field(default_factory=time.time)
    finished_at: float = field(default_factory=time.time)

    def apply_verdict(self, verdict: Verdict) -> None:
        self.verification_code = verdict.code
        self.verification_reason = verdict.reason
        self.verification_details = dict(verdict.details)

    def to_dict(self) -> dict[str, Any]:
        experiment = self.experiment.to_dict()
        experiment["accelerator_model"] = self.accelerator_model
        experiment[REQUESTED_BATCH_SIZE] = self.experiment.batch_size
        if self.batch_size_used is not None:
            experiment["batch_size"] = self.batch_size_used
        metrics, moved = split_metrics(self.metrics)
        if Status(self.status) is Status.SKIPPED:
            metrics["error"] = SKIP_ERROR
        line: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "model": self.model.to_dict(),
            "experiment": experiment,
            "repeat": self.settings.repeat,
            "iterations_per_run": self.settings.iterations_per_run,
            # The seed is the experiment's; lines of version 1 kept it here, and still do.
            "seed": self.experiment.seed,
            "metrics": metrics,
            "summary": {**moved, **self.summary},
            "timestamp": self.timestamp,
            "finished_at": self.finished_at,
            "verification_code": VerificationCode(self.verification_code).value,
            "status": Status(self.status).value,
            "stack_label": self.stack_label,
            "fingerprint": fingerprint(self.model, self.experiment),
            "experiment_id": self.experiment_id,
            "run_id": self.run_id,
            "command": self.command,
            "environment": self.environment,
            "workload": self.workload,
        }
        optional = {
            "notes": self.notes or None,
            "skip_reason": self.skip_reason,
            "verification_reason": self.verification_reason,
            "verification_details": self.verification_details,
            "artifacts": self.artifacts or None,
            "failure_kind": (FailureKind(self.failure_kind or FailureKind.EXPERIMENT).value
                             if Status(self.status) is Status.FAILED else None),
        }
        line.update({key: value for key, value in optional.items() if value is not None})
        achieved = throughput(line)  # from the line's workload signature, when it has one
        if achieved is not None:
            line["summary"]["throughput"] = achieved
        return line


# Readers: tolerant of lines written by any version, or by hand.

def is_verified(line: Mapping[str, Any]) -> bool:
    """Whether the verifier judged this line (any code but the skipped one)."""
    return line.get("verification_code", VerificationCode.VERIFIER_SKIPPED.value) != \
        VerificationCode.VERIFIER_SKIPPED.value


def has_timings(line: Mapping[str, Any]) -> bool:
    return bool(timed_values(line, "per_iter_time"))


def is_infrastructure_failure(line: Mapping[str, Any]) -> bool:
    """Whether a failed line records a failure of the infrastructure, not the experiment's."""
    return (line.get("status") == Status.FAILED.value
            and line.get("failure_kind") == FailureKind.INFRASTRUCTURE.value)


def stack_label_of(line: Mapping[str, Any]) -> str:
    """The stack's label as recorded; for lines older than that field, the raw values."""
    label = line.get("stack_label")
    if isinstance(label, str) and label:
        return label
    experiment = line.get("experiment")
    if not isinstance(experiment, dict):
        return "?"
    parts = [str(experiment[key]) for key in ("xla", "dynamo", "torch_xla2") if experiment.get(key)]
    return "+".join(parts) if parts else "eager"

