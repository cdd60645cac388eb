"""The timing loop (child side): warm-up apart, then timed runs that end synchronized.

The first warm-up iteration is the cold start (compilation included). The first
`iterations_per_run` warm-up iterations also form the cold-start run, which leads every
per-run list of the results line (`TimingResult.metrics`), as the first run does in
PyTorch/XLA's runner; `summary.cold_start_entries` says so, and our readers leave it out
of the steady state (core.schema.timed_values).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from backends.base import DeviceTimer, PreparedModel
from models.base import BenchmarkModel
from core.config import RunSettings
from core.schema import COLD_START_ENTRIES

HOST_CLOCK = "host"
CUDA_EVENTS_CLOCK = "cuda_events"


@dataclass
class ColdRun:
    """The first warm-up iterations as one run: host seconds, iterations, stack metrics."""

    total_time: float
    iterations: int
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class TimingResult:
    """Times in seconds: warm-up iterations, the cold-start run, then one value per timed run."""

    warmup_times: list[float] = field(default_factory=list)
    total_time: list[float] = field(default_factory=list)
    per_iter_time: list[float] = field(default_factory=list)
    run_metrics: dict[str, list[Any]] = field(default_factory=dict)
    cold_run: Optional[ColdRun] = None
    #: What timed the runs: the host clock, or CUDA events (--pure-wall-time).
    clock: str = HOST_CLOCK
    last_result: Any = None

    def metrics(self) -> dict[str, list[Any]]:
        """Per-run lists as the line holds them: the cold-start run first (when there was a
        warm-up), then the timed runs. A stack metric missing from one run reads None."""
        cold = self.cold_run
        lead_total = [cold.total_time] if cold else []
        lead_per_iter = [cold.total_time / cold.iterations] if cold else []
        metrics: dict[str, list[Any]] = {
            "total_time": lead_total + list(self.total_time),
            "per_iter_time": lead_per_iter + list(self.per_iter_time),
        }
        names = list(dict.fromkeys([*(cold.metrics if cold else {}), *self.run_metrics]))
        for name in names:
            lead = [cold.metrics.get(name)] if cold else []
            timed = self.run_metrics.get(name) or [None] * len(self.total_time)
            metrics[name] = lead + list(timed)
        return metrics

    def summary(self) -> dict[str, Any]:
        """Figures of the whole measurement: warm-up, cold start, how the lists start."""
        summary: dict[str, Any] = {
            "warmup_times": list(self.warmup_times),
            COLD_START_ENTRIES: 1 if self.cold_run else 0,
            "timing_clock": self.clock,
        }
        if self.warmup_times:
            summary["cold_start_time"] = self.warmup_times[0]
        return summary


class RunHooks:
    """Called by the timing loop outside the timed regions; the defaults do nothing."""

    def before_timed_run(self, index: int) -> None:
        """Timed run `index` (0-based) is about to start."""

    def after_timed_run(self, index: int) -> None:
        """Timed run `index` (0-based) has ended and been measured."""

    def timed_run_output(self, index: int, result: Any) -> None:
        """The result of the last iteration of timed run `index`, after it was measured."""

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


def _run(prepared: PreparedModel, inputs: list[Any], iterations: int,
         timer: Optional[DeviceTimer] = None) -> Any:
    """One run: `iterations` iterations, then the stack's synchronization. With a device
    timer, each iteration is bracketed by its events."""
    result = None
    for index in range(iterations):
        if timer is not None:
            timer.begin()
        result = _iteration(prepared, inputs[index % len(inputs)])
        if timer is not None:
            timer.end()
    prepared.sync_run(result)
    return result


def measure(
    prepared: PreparedModel,
    bench: BenchmarkModel,
    settings: RunSettings,
    hooks: Optional[RunHooks] = None,
) -> TimingResult:
    """Warm up (the first iteration is the cold start), then time `repeat` runs.

    The stack's per-run metrics are collected for the cold-start run too (the first
    `iterations_per_run` warm-up iterations). With --pure-wall-time, a stack that offers a
    device timer (CUDA) has each timed run's iterations timed between device events.
    `hooks` see each timed run after it is measured, then may run untimed runs of their own.
    """
    hooks = hooks or RunHooks()
    inputs = [prepared.inputs_to_device(bench.make_inputs(seed)) for seed in input_seeds(settings)]
    timing = TimingResult()
    timer = prepared.device_timer() if settings.pure_wall_time else None
    if timer is not None:
        timing.clock = CUDA_EVENTS_CLOCK
    cold_iterations = min(settings.iterations_per_run, settings.warmup)
    result = None
    if cold_iterations:
        prepared.begin_timed_run()
    for index in range(settings.warmup):
        start = time.perf_counter()
        result = _iteration(prepared, inputs[index % len(inputs)])
        prepared.sync_run(result)
        timing.warmup_times.append(time.perf_counter() - start)
        if index + 1 == cold_iterations:
            timing.cold_run = ColdRun(sum(timing.warmup_times), cold_iterations,
                                      dict(prepared.end_timed_run()))
    for run_index in range(settings.repeat):
        hooks.before_timed_run(run_index)
        prepared.begin_timed_run()
        start = time.perf_counter()
        result = _run(prepared, inputs, settings.iterations_per_run, timer)
        elapsed = time.perf_counter() - start
        if timer is not None:
            elapsed = timer.seconds()
        timing.total_time.append(elapsed)
        timing.per_iter_time.append(elapsed / settings.iterations_per_run)
        for name, value in prepared.end_timed_run().items():
            timing.run_metrics.setdefault(name, []).append(value)
        hooks.after_timed_run(run_index)
        hooks.timed_run_output(run_index, result)
    timing.last_result = result
    hooks.after_timed_runs(lambda: _run(prepared, inputs, settings.iterations_per_run), inputs)
    return timing
