"""A TorchBench-V1-style score: the reference run scores 1000.

score = 1000 * geomean(reference median time / measured median time) over the experiments
both runs hold and both passed; every other experiment is listed with the reason it was
left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reports.errors import ReportError
from core.schema import error_headline
from reports.read.record import Record
from reports.stats import geomean

REFERENCE_SCORE = 1000.0


@dataclass
class LeftOut:
    experiment: str
    reason: str


@dataclass
class Score:
    score: float
    experiments: int
    left_out: list[LeftOut] = field(default_factory=list)
    #: Of the experiments scored, those whose timings are flagged unreliable on either side.
    unreliable: int = 0


def _label(record: Record) -> str:
    return f"{record.model_label} [{record.config.label}]"


def _why_not(record: Record, side: str) -> str:
    if record.status != "ok":
        detail = error_headline(record.error)[:120] if record.error.strip() else record.skip_reason
        return f"{record.status} in {side}" + (f": {detail}" if detail else "")
    if record.verification_failed:
        return f"verification {record.verification_code} in {side}"
    return f"no per-iteration times in {side}"


def score(measured: list[Record], reference: list[Record]) -> Score:
    """Score `measured` against `reference`; ReportError when nothing can be compared."""
    ref_by = {r.key: r for r in reference}
    new_by = {r.key: r for r in measured}
    ratios = []
    left_out = []
    unreliable = 0
    for fp, ref in sorted(ref_by.items(), key=lambda kv: (kv[1].config, kv[1].model_label)):
        new = new_by.get(fp)
        if new is None:
            left_out.append(LeftOut(_label(ref), "only in the reference"))
        elif not ref.passed:
            left_out.append(LeftOut(_label(ref), _why_not(ref, "the reference")))
        elif not new.passed:
            left_out.append(LeftOut(_label(ref), _why_not(new, "the measured run")))
        else:
            ratios.append(ref.median_time / new.median_time)
            unreliable += ref.unreliable or new.unreliable
    for fp, new in sorted(new_by.items(), key=lambda kv: (kv[1].config, kv[1].model_label)):
        if fp not in ref_by:
            left_out.append(LeftOut(_label(new), "not in the reference"))
    mean = geomean(ratios)
    if mean is None:
        raise ReportError("no experiment passed in both the results and the reference: there is nothing to score")
    return Score(score=REFERENCE_SCORE * mean, experiments=len(ratios), left_out=left_out,
                 unreliable=unreliable)
