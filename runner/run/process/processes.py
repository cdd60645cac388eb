"""Several timing processes of one experiment made one result (parent side, pure).

Each timing process (a child forked or spawned for the experiment, `--processes`) has its
own warm-up and timed runs. The experiment's figure is the median over processes of each
process's median time per iteration; the line keeps every process's median and their
spread, so that the reports take processes, not iterations, as the samples
(`summary.processes.medians`). Compilation is the first process's: later ones may reuse its
compile caches, so their cold starts are not compile times.

The per-run lists of the line (`metrics`) hold the first process's cold-start entry, then
the timed runs of every process in order; `metrics.process` says which process each entry
came from (1-based), so PyTorch/XLA's tools still read one list per metric.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from typing import Any, Optional, Sequence

from core.contract import ChildResult
from core.host.host_bound import HOST_BOUND_RATIO, LINE_BOUND, host_bound_counts
from core.host.host_state import join_processes
from core.host.host_state import summarize as summarize_host_state
from core.schema import COLD_START_ENTRIES, Status

#: Summary keys summed over processes (counts of iterations).
_HOST_BOUND_COUNTS = ("host_bound_iterations", "host_bound_judged")


def _lead(result: ChildResult) -> int:
    count = result.summary.get(COLD_START_ENTRIES, 0)
    return count if isinstance(count, int) and count > 0 else 0


def _timed(result: ChildResult, name: str) -> list[Any]:
    values = result.metrics.get(name)
    return list(values[_lead(result):]) if isinstance(values, list) else []


def process_median(result: ChildResult) -> Optional[float]:
    """The median time per iteration of one process's timed runs."""
    times = [t for t in _timed(result, "per_iter_time") if isinstance(t, (int, float))]
    return statistics.median(times) if times else None


def _relative_range(values: Sequence[float]) -> Optional[float]:
    if len(values) < 2:
        return None
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle > 0 else None


def _paired(results: Sequence[ChildResult]) -> Optional[dict[str, Any]]:
    """The paired speedup over processes: the median of each process's speedup; the pairs
    and Welch's p-value over every process's runs."""
    speedups = [r.summary["paired_speedup"]["speedup"] for r in results
                if isinstance(r.summary.get("paired_speedup"), dict)
                and isinstance(r.summary["paired_speedup"].get("speedup"), (int, float))]
    if not speedups:
        return None
    eager = [e for r in results for e in _timed(r, "eager_per_iter_time")]
    compiled = [c for r in results for c in _timed(r, "per_iter_time")]
    paired = dict(results[0].summary["paired_speedup"])
    paired.update(speedup=statistics.median(speedups), process_speedups=speedups,
                  pairs=min(len(eager), len(compiled)))
    if eager and compiled and len(eager) == len(compiled):
        paired["median_of_pairs"] = statistics.median(e / c for e, c in zip(eager, compiled))
        paired["eager_median_per_iter_time"] = statistics.median(eager)
        if len(compiled) >= 2:
            from scipy import stats

            p_value = float(stats.ttest_ind(eager, compiled, equal_var=False).pvalue)
            paired["p_value"] = p_value if math.isfinite(p_value) else None
    return paired


def _number(value: Any) -> Optional[float]:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _busy_ms(busy: Any) -> Optional[float]:
    return _number(busy.get("ms")) if isinstance(busy, dict) else None


def _device_busy(results: Sequence[ChildResult]) -> dict[str, Any]:
    """The device's busy time per iteration over processes (child/device_busy.py): the
    median of the processes' figures with their range and spread, eager's likewise; {}
    where no process measured it (the first's reason stands)."""
    busy = [r.summary.get("device_busy") for r in results]
    values = [value for value in map(_busy_ms, busy) if value is not None]
    if not values:
        return {}
    eager = [value for value in (_busy_ms(b.get("eager")) for b in busy if isinstance(b, dict))
             if value is not None]
    middle = statistics.median(values)
    combined = {**next(b for b in busy if _busy_ms(b) is not None), "ms": middle,
                "processes_ms": values, "low": min(values), "high": max(values),
                "spread": _relative_range(values)}
    launches = [((b.get("digests") or {}).get("launches") if isinstance(b, dict) else None)
                for b in busy]
    if any(launches):
        combined["processes_launches"] = launches
    found: dict[str, Any] = {"device_busy": combined, "device_busy_ms": middle}
    if eager:
        combined["eager"] = {**combined.get("eager", {}), "ms": statistics.median(eager),
                             "processes_ms": eager}
        found["eager_device_busy_ms"] = statistics.median(eager)
    return found


def _cpu_time(results: Sequence[ChildResult]) -> dict[str, Any]:
    """The timing thread's CPU time per iteration over processes (child/trust.py): the
    median of the processes' figures, each kept; None (with the first process's reason)
    unless every process has one; {} where none recorded it."""
    figures = [(r.summary.get("cpu_time"), _number(r.summary.get("cpu_time_ms"))) for r in results]
    recorded = [(found, value) for found, value in figures if isinstance(found, dict)]
    if not recorded:
        return {}
    values = [value for _, value in recorded if value is not None]
    if len(values) < len(figures):
        why = next((found for found, value in recorded if value is None), recorded[0][0])
        return {"cpu_time": why, "cpu_time_ms": None}
    middle = statistics.median(values)
    found = {**recorded[0][0], "ms": middle, "processes_ms": values,
             "spread": _relative_range(values)}
    for name in ("pulse_ms", "in_pulses"):
        each = [_number(figure.get(name)) for figure, _ in recorded]
        if all(value is not None for value in each):
            found[name] = statistics.median(each)
        else:
            found.pop(name, None)
    return {"cpu_time": found, "cpu_time_ms": middle}


def combine(results: Sequence[ChildResult], asked: int) -> ChildResult:
    """One result of the experiment from its processes' results, in order.

    Only processes that ended OK count; the first must have (else its result is returned
    as it is). A later process that failed is named in `summary.processes.failed` and a
    note, and the others still make the figure."""
    first = results[0]
    if first.status is not Status.OK or len(results) == 1 and asked == 1:
        return first
    good = [(index + 1, r) for index, r in enumerate(results) if r.status is Status.OK]
    failed = [{"process": index + 1, "status": r.status.value,
               "error": r.error.exception if r.error else r.skip_reason}
              for index, r in enumerate(results) if r.status is not Status.OK]
    metrics: dict[str, Any] = {}
    names = list(dict.fromkeys(name for _, r in good for name, values in r.metrics.items()
                               if isinstance(values, list)))
    lead = _lead(first)
    for name in names:
        values = first.metrics.get(name)
        combined = list(values[:lead]) if isinstance(values, list) else [None] * lead
        for _, result in good:
            timed = _timed(result, name)
            combined.extend(timed or [None] * len(_timed(result, "per_iter_time")))
        metrics[name] = combined
    metrics["process"] = [1] * lead + [index for index, r in good
                                       for _ in _timed(r, "per_iter_time")]
    medians = [process_median(r) for _, r in good]
    known = [m for m in medians if m is not None]
    summary = dict(first.summary)
    processes: dict[str, Any] = {
        "asked": asked,
        "count": len(good),
        "medians": known,
        "median": statistics.median(known) if known else None,
        "low": min(known) if known else None,
        "high": max(known) if known else None,
        "spread": _relative_range(known),
        "cold_start_times": [r.summary.get("cold_start_time") for _, r in good],
        "warmup_seconds": [sum(r.summary.get("warmup_times") or []) for _, r in good],
        "failed": failed,
    }
    eager_medians = [statistics.median(e) for _, r in good
                     if (e := [v for v in _timed(r, "eager_per_iter_time") if v is not None])]
    if eager_medians:
        processes["eager_medians"] = eager_medians
    summary["processes"] = processes
    paired = _paired([r for _, r in good])
    if paired is not None:
        summary["paired_speedup"] = paired
    reasons = [f"process {index}: {reason}" if len(good) > 1 else reason
               for index, r in good for reason in r.summary.get("unreliable_reasons") or []]
    summary["unreliable"] = bool(reasons)
    summary["unreliable_reasons"] = reasons
    summary["contended"] = any(r.summary.get("contended") for _, r in good)
    variations = [r.summary.get("timing_variation") for _, r in good]
    known_variations = [v for v in variations if isinstance(v, (int, float))]
    summary["timing_variation"] = max(known_variations) if known_variations else None
    cpu = [r.summary.get("cpu") for _, r in good if isinstance(r.summary.get("cpu"), dict)]
    if cpu:
        # The most contended process stands for the experiment; every one is kept.
        summary["cpu"] = max(cpu, key=lambda window: window.get("others_fraction") or 0.0)
        summary["cpu_processes"] = cpu
    cards = [r.summary.get("gpu") for _, r in good if isinstance(r.summary.get("gpu"), dict)]
    if cards:
        # The process whose card was held down longest stands for the experiment.
        summary["gpu"] = max(cards, key=lambda window: sum(
            (window.get("clocks_held_down") or {}).values()))
        summary["gpu_processes"] = cards
    summary.update(_device_busy([r for _, r in good]))
    summary.update(_cpu_time([r for _, r in good]))
    windows = [r.summary.get("host_windows") for _, r in good]
    if any(isinstance(columns, dict) for columns in windows):
        # Every process's runs, one after the other, summed up over all and per process.
        summary["host_windows"] = join_processes(
            [columns if isinstance(columns, dict) else None for columns in windows])
        summary["host_state"] = {**summarize_host_state(summary["host_windows"]),
                                 "processes": [r.summary.get("host_state") for _, r in good]}
    references = [r.summary.get("reference") for _, r in good
                  if isinstance(r.summary.get("reference"), dict)]
    if references:
        summary["reference_processes"] = references
    phases = [r.summary.get("phases") for _, r in good if isinstance(r.summary.get("phases"), dict)]
    if phases:
        summary["phases_processes"] = phases
    gates = [r.summary.get("device_gate") for _, r in good]
    if any(isinstance(gate, dict) for gate in gates):
        summary["device_gate_processes"] = gates
    if all(name in r.summary for _, r in good for name in _HOST_BOUND_COUNTS):
        summary.update(host_bound_counts(
            sum(r.summary["host_bound_iterations"] for _, r in good),
            sum(r.summary["host_bound_judged"] for _, r in good),
            first.summary.get("host_bound_ratio", HOST_BOUND_RATIO),
            first.summary.get("host_bound_line_bound", LINE_BOUND)))
    notes = list(dict.fromkeys(note for _, r in good for note in r.notes))
    for entry in failed:
        notes.append(f"timing process {entry['process']} of {asked} ended {entry['status']}: "
                     f"{entry['error']}; the figure is of the other processes")
    return replace(first, metrics=metrics, summary=summary, notes=notes)
