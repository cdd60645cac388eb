"""Per-experiment rows and per-configuration summaries of loaded records.

Speedup: the line's paired speedup (eager timed interleaved in the same process) where it
has one, else baseline median time / experiment median time, where the baseline is the same
model on the same accelerator, test, precision and batch size with the baseline stack
(default eager). Memory compression ratio = eager peak / experiment peak, for device memory
only: on CPU the only peak is the whole process's RSS, mostly the stack's own footprint,
so no ratio is computed from it (and no warning raised).

The pass rate is the HUD's accuracy: experiments passing verification over those the
verifier judged plus those that failed to run, in a configuration where anything was
verified at all; experiments never verified are counted apart as unverified (and a
configuration with nothing verified has no pass rate, failures or not).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Optional

from reports.errors import ReportError
from reports.read.record import ConfigKey, Record
from reports.stats import geomean
from core.host.host_bound import HOST_SHARE_BOUND, LINE_BOUND
from core.schema import VERIFICATION_NOT_RUN, Status, VerificationCode, error_headline

DEFAULT_BASELINE = "eager"
SPEEDUP_WARNING = 0.95
COMPILE_TIME_WARNING_S = 120.0
COMPRESSION_WARNING = 0.9


@dataclass
class Row:
    """One experiment with its comparison against the baseline."""

    record: Record
    baseline: Optional[Record]
    speedup: Optional[float] = None
    compression_ratio: Optional[float] = None
    warnings: list[str] = field(default_factory=list)
    #: "paired" (the line's own interleaved eager runs) or "baseline" (the baseline's line).
    speedup_method: str = ""

    @property
    def speedup_counts(self) -> bool:
        """Enters the geometric mean: both sides ran and neither failed verification."""
        if self.speedup is None or not self.record.passed:
            return False
        if self.speedup_method == "paired":
            return True
        return self.baseline is not None and self.baseline.passed


@dataclass
class ConfigSummary:
    """One configuration over all its models."""

    config: ConfigKey
    models: int
    skipped: int
    #: Ran, and not found wrong by the verifier (the models whose speedup can count).
    passed: int
    geomean_speedup: Optional[float]
    speedup_models: int
    mean_compile_time: Optional[float]
    compile_models: int
    compression_ratio: Optional[float]
    compression_models: int
    #: Judged by the verifier, plus the failures to run where anything was verified: the
    #: pass rate's denominator.
    judged: int = 0
    #: Status ok and verification PASS: the pass rate's numerator.
    accurate: int = 0
    #: Memory kinds seen among the experiments that ran ("device", "host").
    memory_kinds: tuple[str, ...] = ()

    @property
    def counted(self) -> int:
        return self.models - self.skipped

    @property
    def unverified(self) -> int:
        """Not skipped, ran or not, but never judged by the verifier."""
        return self.counted - self.judged

    @property
    def pass_rate(self) -> Optional[float]:
        """Accuracy pass rate over the judged experiments; None when none was judged."""
        return self.accurate / self.judged if self.judged else None

    @property
    def memory_note(self) -> str:
        """Why there is no compression ratio, when there is none."""
        if self.compression_ratio is not None:
            return ""
        if "device" not in self.memory_kinds and "host" in self.memory_kinds:
            return "host RSS only: no ratio"
        return ""


@dataclass
class Report:
    """Everything the renderers need."""

    baseline: str
    rows: list[Row]
    summaries: list[ConfigSummary]
    notes: list[str] = field(default_factory=list)
    #: Warnings the notes say once (why TFLOP/s has no percent of peak: the device's), left
    #: out of `warnings` (each row keeps its own, for the CSV and the dashboard).
    said_once: frozenset[str] = frozenset()

    @property
    def warnings(self) -> list[tuple[Row, str]]:
        return [(row, text) for row in self.rows for text in row.warnings if text not in self.said_once]


def stacks(records: list[Record]) -> list[str]:
    return sorted({r.config.stack for r in records})


def resolve_baseline(baseline: Optional[str], records: list[Record]) -> str:
    """The baseline stack label; an explicitly named one must exist in the records."""
    known = stacks(records)
    if baseline is None:
        return DEFAULT_BASELINE
    if baseline in known:
        return baseline
    folded = [s for s in known if s.lower() == baseline.lower()]
    if len(folded) == 1:
        return folded[0]
    raise ReportError(
        f"--baseline {baseline!r} is not a stack in the results; stacks there: {', '.join(known) or 'none'}"
    )


def _warnings(row: Row) -> list[str]:
    record = row.record
    found: list[str] = []
    if record.status == Status.FAILED:
        first = error_headline(record.error) if record.error.strip() else "no error message"
        found.append(f"failed: {first[:160]}")
    elif record.status != Status.SKIPPED:
        if record.verification_code != VerificationCode.PASS and record.verification_code not in VERIFICATION_NOT_RUN:
            found.append(f"verification {record.verification_code}")
        if not record.ran:
            found.append("no per-iteration times")
    if row.speedup is not None and row.speedup < SPEEDUP_WARNING:
        found.append(f"speedup {row.speedup:.2f} < {SPEEDUP_WARNING}")
    if record.compile_time is not None and record.compile_time > COMPILE_TIME_WARNING_S:
        found.append(f"compile time {record.compile_time:.0f} s > {COMPILE_TIME_WARNING_S:.0f} s")
    if record.unreliable:
        found.append("unreliable timings" + (f": {record.unreliable_reason}" if record.unreliable_reason else ""))
    if record.tflops is not None and record.peak_fraction is None and record.peak_note:
        found.append(record.peak_note)
    if record.host_bound:
        fraction = record.host_bound_fraction
        if fraction is not None and fraction <= LINE_BOUND:  # flagged by the host's share
            found.append("host-bound: the card was busy for under "
                         f"{1 - HOST_SHARE_BOUND:.0%} of each iteration; the host's part is "
                         "the rest")
        else:
            share = f"{fraction:.0%} of" if fraction is not None else "most"
            found.append(f"host-bound: {share} the timed iterations had the device waiting for the host")
    if row.compression_ratio is not None and row.compression_ratio < COMPRESSION_WARNING:
        found.append(f"memory compression {row.compression_ratio:.2f} < {COMPRESSION_WARNING}")
    return found


def _baseline_index(records: list[Record], baseline: str) -> dict[tuple, Record]:
    index: dict[tuple, Record] = {}
    for record in records:
        if record.config.is_baseline(baseline):
            index[(record.model_label, record.config, record.batch_size)] = record
    return index


def build_rows(records: list[Record], baseline: str) -> list[Row]:
    index = _baseline_index(records, baseline)
    rows = []
    for record in records:
        base = index.get((record.model_label, record.config.baseline_key(baseline), record.batch_size))
        row = Row(record=record, baseline=base)
        if record.paired_speedup is not None and record.ran and record.config.stack != baseline:
            row.speedup, row.speedup_method = record.paired_speedup, "paired"
        elif base is not None and base.ran and record.ran:
            row.speedup, row.speedup_method = base.median_time / record.median_time, "baseline"
        if record.memory_kind == "device" and record.peak_memory and record.status != Status.SKIPPED:
            eager_peak = record.eager_peak_device_memory
            if eager_peak is None and base is not None and base.memory_kind == "device":
                eager_peak = base.peak_memory
            if eager_peak:
                row.compression_ratio = eager_peak / record.peak_memory
        row.warnings = _warnings(row)
        rows.append(row)
    return rows


def _judged(members: list[Row]) -> int:
    verified = sum(r.record.verified for r in members)
    return verified + sum(r.record.status == Status.FAILED for r in members) if verified else 0


def summarise(rows: list[Row]) -> list[ConfigSummary]:
    """One summary per configuration, in the order configurations first appear in `rows`."""
    groups: dict[ConfigKey, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.record.config, []).append(row)
    summaries = []
    for config in groups:
        members = groups[config]
        speedups = [r.speedup for r in members if r.speedup_counts]
        compiles = [r.record.compile_time for r in members if r.record.ran and r.record.compile_time is not None]
        ratios = [r.compression_ratio for r in members if r.compression_ratio is not None and r.record.passed]
        summaries.append(
            ConfigSummary(
                config=config,
                models=len(members),
                skipped=sum(r.record.status == Status.SKIPPED for r in members),
                passed=sum(r.record.passed for r in members),
                geomean_speedup=geomean(speedups),
                speedup_models=len(speedups),
                mean_compile_time=statistics.fmean(compiles) if compiles else None,
                compile_models=len(compiles),
                compression_ratio=geomean(ratios),
                compression_models=len(ratios),
                judged=_judged(members),
                accurate=sum(r.record.accurate for r in members),
                memory_kinds=tuple(sorted({r.record.memory_kind for r in members
                                           if r.record.memory_kind and r.record.ran})),
            )
        )
    return summaries


def build_report(records: list[Record], baseline: Optional[str] = None) -> Report:
    """Rows and summaries of the records against the baseline stack."""
    chosen = resolve_baseline(baseline, records)
    records = sorted(records, key=lambda r: (r.config.stack != chosen, r.config, r.model_label))
    rows = build_rows(records, chosen)
    notes = []
    # Why TFLOP/s has no percent of peak: said once per reason (a device's), not per row.
    no_peak: dict[str, int] = {}
    for record in records:
        if record.tflops is not None and record.peak_fraction is None and record.peak_note:
            no_peak[record.peak_note] = no_peak.get(record.peak_note, 0) + 1
    for reason, count in no_peak.items():
        notes.append(f"TFLOP/s without a percent of peak for {count} experiment(s): {reason}")
    if records and chosen not in stacks(records):
        notes.append(f"no {chosen!r} experiments in the results: speedups and memory ratios are not available")
    return Report(baseline=chosen, rows=rows, summaries=summarise(rows), notes=notes,
                  said_once=frozenset(no_peak))
