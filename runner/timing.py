"""The timing loop (child side): warm-up apart, then timed runs that end synchronized."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from backends.base import PreparedModel
from models.base import BenchmarkModel
from core.config import RunSettings


@dataclass
class TimingResult:
    """Times in seconds: warm-up iterations, then one value per timed run."""

    warmup_times: list[float] = field(default_factory=list)
    total_time: list[float] = field(default_factory=list)
    per_iter_time: list[float] = field(default_factory=list)
    run_metrics: dict[str, list[Any]] = field(default_factory=dict)
    last_result: Any = None

    def metrics(self) -> dict[str, Any]:
        metrics: dict[str, Any] = {
            "total_time": self.total_time,
            "per_iter_time": self.per_iter_time,
            "warmup_times": self.warmup_times,
        }
        if self.warmup_times:
            metrics["cold_start_time"] = self.warmup_times[0]
        metrics.update(self.run_metrics)
        return metrics


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
        result = _iteration(prepared, inputs[index % len(inputs)])
    prepared.sync_run(result)
    return result


def measure(
    prepared: PreparedModel,
    bench: BenchmarkModel,
    settings: RunSettings,
    hooks: Optional[RunHooks] = None,
) -> TimingResult:
    """Warm up (the first iteration is the cold start), then time `repeat` runs.

    `hooks` see each timed run after it is measured, then may run untimed runs of their own.
    """
    hooks = hooks or RunHooks()
    inputs = [prepared.inputs_to_device(bench.make_inputs(seed)) for seed in input_seeds(settings)]
    timing = TimingResult()
    result = None
    for index in range(settings.warmup):
        start = time.perf_counter()
        result = _iteration(prepared, inputs[index % len(inputs)])
        prepared.sync_run(result)
        timing.warmup_times.append(time.perf_counter() - start)
    for run_index in range(settings.repeat):
        hooks.before_timed_run(run_index)
        prepared.begin_timed_run()
        start = time.perf_counter()
        result = _run(prepared, inputs, settings.iterations_per_run)
        elapsed = time.perf_counter() - start
        timing.total_time.append(elapsed)
        timing.per_iter_time.append(elapsed / settings.iterations_per_run)
        for name, value in prepared.end_timed_run().items():
            timing.run_metrics.setdefault(name, []).append(value)
        hooks.after_timed_run(run_index)
    timing.last_result = result
    hooks.after_timed_runs(lambda: _run(prepared, inputs, settings.iterations_per_run), inputs)
    return timing
