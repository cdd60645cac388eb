"""The timing loop (child side): warm-up apart, then timed runs that end synchronized."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from backends.base import PreparedModel
from core.config import RunSettings
from models.base import BenchmarkModel
from runner.trust import CpuWatch


@dataclass
class TimingResult:
    """Times in seconds: warm-up iterations, then one value per timed run.

    `reference_*` hold the eager runs interleaved with the stack's (paired timing).
    """

    warmup_times: list[float] = field(default_factory=list)
    total_time: list[float] = field(default_factory=list)
    run_metrics: dict[str, list[Any]] = field(default_factory=dict)
    reference_warmup_times: list[float] = field(default_factory=list)
    reference_total_time: list[float] = field(default_factory=list)
    peak_device_memory: Optional[int] = None
    reference_peak_device_memory: Optional[int] = None
    iterations_per_run: int = 1
    last_result: Any = None

    @property
    def per_iter_time(self) -> list[float]:
        return [t / self.iterations_per_run for t in self.total_time]

    @property
    def reference_per_iter_time(self) -> list[float]:
        return [t / self.iterations_per_run for t in self.reference_total_time]

    def metrics(self) -> dict[str, Any]:
        """Per-run lists."""
        metrics: dict[str, Any] = {
            "total_time": self.total_time,
            "per_iter_time": self.per_iter_time,
        }
        if self.reference_total_time:
            metrics["eager_total_time"] = self.reference_total_time
            metrics["eager_per_iter_time"] = self.reference_per_iter_time
            metrics["paired_speedup"] = [
                eager / compiled for eager, compiled in zip(self.reference_total_time,
                                                           self.total_time)]
        metrics.update(self.run_metrics)
        return metrics

    def summary(self) -> dict[str, Any]:
        """Figures of the whole experiment: cold start, compile time, the paired speedup."""
        summary: dict[str, Any] = {"warmup_times": self.warmup_times}
        steady = statistics.median(self.per_iter_time) if self.total_time else None
        if self.warmup_times:
            summary["cold_start_time"] = self.warmup_times[0]
            if steady is not None:
                # The dashboard's compilation latency: the cold start (fresh compile cache)
                # less a steady-state iteration.
                summary["compile_time_s"] = max(self.warmup_times[0] - steady, 0.0)
        if self.peak_device_memory is not None:
            summary["peak_device_memory_bytes"] = self.peak_device_memory
        if self.reference_total_time and self.total_time:
            summary["paired_speedup"] = paired_speedup(self.reference_per_iter_time,
                                                       self.per_iter_time)
            if self.reference_peak_device_memory is not None:
                summary["eager_peak_device_memory_bytes"] = self.reference_peak_device_memory
        return summary


def paired_speedup(eager: list[float], compiled: list[float]) -> dict[str, Any]:
    """Speedup of interleaved runs as PyTorch's harness reports it (median eager over
    median compiled), the median of the per-pair ratios, and Welch's t-test p-value that
    the two samples have the same mean."""
    result: dict[str, Any] = {
        "method": "paired",
        "pairs": len(compiled),
        "speedup": statistics.median(eager) / statistics.median(compiled),
        "median_of_pairs": statistics.median(e / c for e, c in zip(eager, compiled)),
        "eager_median_per_iter_time": statistics.median(eager),
        "p_value": None,
    }
    if len(compiled) >= 2:
        from scipy import stats

        p_value = float(stats.ttest_ind(eager, compiled, equal_var=False).pvalue)
        result["p_value"] = p_value if math.isfinite(p_value) else None
    return result


class RunHooks:
    """Called by the timing loop outside the timed regions; the defaults do nothing."""

    def before_timed_run(self, index: int) -> None:
        """Timed run `index` (0-based) is about to start."""

    def after_timed_run(self, index: int) -> None:
        """Timed run `index` (0-based) has ended and been measured."""

    def after_timed_runs(self, run_once: Callable[[], Any], device_inputs: list[Any]) -> None:
        """All timed runs have ended; `run_once()` runs one more run like them, untimed."""


def input_seeds(settings: RunSettings) -> list[int]:
    """One seed per distinct input set: several only with --randomize-input."""
    count = settings.iterations_per_run if settings.randomize_input else 1
    return [settings.seed + offset for offset in range(count)]


def _iteration(prepared: PreparedModel, device_inputs: Any) -> Any:
    result = prepared.step(device_inputs)
    if prepared.sync_every_iteration:
        prepared.sync_iteration()
    return result


def _run(prepared: PreparedModel, inputs: list[Any], iterations: int) -> Any:
    """One run: `iterations` iterations, then the stack's synchronization."""
    result = None
    for index in range(iterations):
        result = None  # as in warm_up: one iteration's outputs alive at a time
        result = _iteration(prepared, inputs[index % len(inputs)])
    prepared.sync_run(result)
    return result


def warm_up(prepared: PreparedModel, inputs: list[Any], count: int) -> tuple[list[float], Any]:
    """`count` synchronized iterations, each timed (the first is the cold start)."""
    times, result = [], None
    for index in range(count):
        result = None  # the last iteration's outputs must not count in this one's memory
        start = time.perf_counter()
        result = _iteration(prepared, inputs[index % len(inputs)])
        prepared.sync_run(result)
        times.append(time.perf_counter() - start)
    return times, result


def timed_run(prepared: PreparedModel, inputs: list[Any], iterations: int) -> tuple[float, Any]:
    start = time.perf_counter()
    result = _run(prepared, inputs, iterations)
    return time.perf_counter() - start, result


def measure(
    prepared: PreparedModel,
    bench: BenchmarkModel,
    settings: RunSettings,
    hooks: Optional[RunHooks] = None,
    reference: Optional[PreparedModel] = None,
    watch: Optional[CpuWatch] = None,
) -> TimingResult:
    """Warm up (the first iteration is the cold start), then time `repeat` runs.

    With a `reference` (eager on the same module), each timed run of the stack follows a
    timed run of the reference on the same inputs (A B A B ...), so drift reaches both
    alike; the reference warms up first, so the stack's cold start holds its compilation
    and not the device's start-up. `hooks` see each timed run of the stack after it is
    measured, then may run untimed runs of their own. `watch` spans the timed runs.
    """
    hooks = hooks or RunHooks()
    seeds = input_seeds(settings)
    inputs = [prepared.inputs_to_device(bench.make_inputs(seed)) for seed in seeds]
    timing = TimingResult()
    iterations = settings.iterations_per_run
    if reference is not None:
        reference_inputs = [reference.inputs_to_device(bench.make_inputs(seed)) for seed in seeds]
        reference.reset_peak_device_memory()
        timing.reference_warmup_times, _ = warm_up(reference, reference_inputs,
                                                    max(settings.warmup, 1))
        timing.reference_peak_device_memory = reference.peak_device_memory_bytes()
    prepared.reset_peak_device_memory()
    timing.warmup_times, _ = warm_up(prepared, inputs, settings.warmup)
    result = None
    timing.peak_device_memory = prepared.peak_device_memory_bytes()
    if watch is not None:
        watch.start()
    for run_index in range(settings.repeat):
        if reference is not None:
            elapsed, _ = timed_run(reference, reference_inputs, iterations)
            timing.reference_total_time.append(elapsed)
        hooks.before_timed_run(run_index)
        prepared.begin_timed_run()
        result = None
        elapsed, result = timed_run(prepared, inputs, iterations)
        timing.total_time.append(elapsed)
        for name, value in prepared.end_timed_run().items():
            timing.run_metrics.setdefault(name, []).append(value)
        hooks.after_timed_run(run_index)
    if watch is not None:
        watch.stop()
    timing.iterations_per_run = iterations
    timing.last_result = result
    hooks.after_timed_runs(lambda: _run(prepared, inputs, iterations), inputs)
    return timing
