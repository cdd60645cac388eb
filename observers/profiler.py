"""PyTorch profiler (child side): profiled runs of their own, after the timed runs.

Each profiled run mirrors one timed run (same iterations, same synchronization), so
profiling overhead never reaches `total_time`. In the line's `metrics`, one value per
profiled run: `total_cpu_time_s` (the sum of every operator's self CPU time) and
`per_iter_cpu_time_s`; on CUDA, the same for CUDA time. In its `summary`, with
--profile-cuda-cpu-individual-ops, PyTorch/XLA's `xla_unlowered_ops` (XLA stacks: the
operators that fell back to the CPU) or `inductor_ops` (other stacks: aten operators): one
dict per profiled run, operator -> self and total CPU/CUDA seconds and calls.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Optional

from backends.base import TORCH_PROFILER
from observers.base import Flag, Observer, ObserverContext, RunObserver
from observers.layout import CHROME_TRACE_FILE, PROFILE_TABLE_FILE, RUN_DIR_PREFIX, run_dir

log = logging.getLogger(__name__)

MICROSECONDS = 1e6
TABLE_ROWS = 100


def _device_times(event: Any) -> tuple[float, float]:
    """(self, total) device microseconds of a profiler average, across torch versions."""
    own = getattr(event, "self_device_time_total", None)
    if own is None:
        own = getattr(event, "self_cuda_time_total", 0.0)
    total = getattr(event, "device_time_total", None)
    if total is None:
        total = getattr(event, "cuda_time_total", 0.0)
    return float(own or 0.0), float(total or 0.0)


def run_totals(averages: Any) -> tuple[float, float]:
    """(CPU seconds, device seconds): the sum of every operator's self time."""
    cpu = sum(float(event.self_cpu_time_total) for event in averages)
    device = sum(_device_times(event)[0] for event in averages)
    return cpu / MICROSECONDS, device / MICROSECONDS


def operator_rows(averages: Any, keep: Callable[[str], bool]) -> dict[str, dict[str, float]]:
    """Per operator kept by `keep`: self/total CPU and CUDA seconds, and calls."""
    rows: dict[str, dict[str, float]] = {}
    for event in averages:
        if not keep(event.key):
            continue
        own_device, total_device = _device_times(event)
        rows[event.key] = {
            "self_cpu_time_s": float(event.self_cpu_time_total) / MICROSECONDS,
            "total_cpu_time_s": float(event.cpu_time_total) / MICROSECONDS,
            "self_cuda_time_s": own_device / MICROSECONDS,
            "total_cuda_time_s": total_device / MICROSECONDS,
            "num_of_calls": int(event.count),
        }
    return rows


class ProfilerObserver(RunObserver):
    """Runs `repeat` profiled runs after the timed ones and records what was asked."""

    def __init__(
        self,
        experiment_dir: Path,
        runs: int,
        iterations_per_run: int,
        device_type: str,
        fallback_operators: Callable[[], Optional[set[str]]],
        totals: bool,
        individual_ops: bool,
        dump: bool,
    ) -> None:
        self.experiment_dir = experiment_dir
        self.runs = runs
        self.iterations = iterations_per_run
        self.cuda = device_type == "cuda"
        self.fallback_operators = fallback_operators
        self.totals = totals
        self.individual_ops = individual_ops
        self.dump = dump
        self._metrics: dict[str, Any] = {}
        self._summary: dict[str, Any] = {}

    def after_timed_runs(self, run_once: Callable[[], Any], device_inputs: list[Any]) -> None:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        series: dict[str, list[float]] = {}
        per_run_operators: list[dict[str, dict[str, float]]] = []
        for index in range(self.runs):
            with profile(activities=activities) as profiler:
                run_once()
            averages = profiler.key_averages()
            if self.totals:
                cpu, device = run_totals(averages)
                values = {"total_cpu_time_s": cpu, "per_iter_cpu_time_s": cpu / self.iterations}
                if self.cuda:
                    values.update(total_cuda_time_s=device,
                                  per_iter_cuda_time_s=device / self.iterations)
                for name, value in values.items():
                    series.setdefault(name, []).append(value)
            if self.individual_ops:
                per_run_operators.append(operator_rows(averages, self._operator_filter()))
            if self.dump:
                directory = run_dir(self.experiment_dir, index)
                profiler.export_chrome_trace(str(directory / CHROME_TRACE_FILE))
                sort = "self_cuda_time_total" if self.cuda else "self_cpu_time_total"
                table = averages.table(sort_by=sort, row_limit=TABLE_ROWS)
                (directory / PROFILE_TABLE_FILE).write_text(table + "\n", encoding="utf-8")
        self._metrics = dict(series)
        if self.individual_ops:
            # PyTorch/XLA's names: the operators XLA did not lower, or (elsewhere) aten ops.
            key = "inductor_ops" if self.fallback_operators() is None else "xla_unlowered_ops"
            self._summary = {key: per_run_operators}

    def _operator_filter(self) -> Callable[[str], bool]:
        fallbacks = self.fallback_operators()
        if fallbacks is None:
            return lambda name: name.startswith("aten::")
        return lambda name: name in fallbacks

    def metrics(self) -> dict[str, Any]:
        return self._metrics

    def summary(self) -> dict[str, Any]:
        return self._summary


class Profiler(Observer):
    name = "profiler"
    order = 20
    flags = (
        Flag("--profile-cuda-cpu",
             "CPU and CUDA time from the PyTorch profiler, in profiled runs of their own "
             "after the timed runs"),
        Flag("--profile-cuda-cpu-individual-ops",
             "per operator CPU/CUDA time and calls (XLA stacks: the operators that fell back "
             "to CPU; others: aten operators)"),
        Flag("--dump-pytorch-profiles",
             "a Chrome trace and the profiler's operator table per profiled run"),
    )
    feature = TORCH_PROFILER
    elsewhere = "torchax runs jitted JAX functions, whose work the PyTorch profiler does not see"
    files = (f"{RUN_DIR_PREFIX}<i>/{CHROME_TRACE_FILE}", f"{RUN_DIR_PREFIX}<i>/{PROFILE_TABLE_FILE}")

    def create(self, context: ObserverContext) -> RunObserver:
        settings = context.settings
        return ProfilerObserver(
            context.folder, settings.repeat, settings.iterations_per_run,
            context.experiment.accelerator, context.prepared.fallback_operators,
            totals=bool(settings.observing("profile_cuda_cpu")),
            individual_ops=bool(settings.observing("profile_cuda_cpu_individual_ops")),
            dump=bool(settings.observing("dump_pytorch_profiles")),
        )


OBSERVER = Profiler()
