"""PyTorch/XLA in the child: the model on the XLA device, synchronization and metrics.

Imported only by the child (it imports torch_xla); the parent-side rules are in
backends/stacks/xla_lazy.py and backends/availability.py.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterator, Optional

import torch
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as xla_metrics
import torch_xla.debug.profiler as xla_profiler

from backends.runtimes.torch_device import TorchPreparedModel
from core.host.machine import cpu_model_name
from models.base import BenchmarkModel
from core.config import ExperimentConfig

#: torch_xla metrics reported per timed run, as (metric name, prefix in the results line).
REPORTED_XLA_METRICS = (("CompileTime", "xla_CompileTime"), ("ExecuteTime", "xla_ExecuteTime"))
NANOSECONDS = 1e9


def xla_metric(name: str) -> tuple[int, float]:
    """(number of samples, total seconds) of a torch_xla time metric since the last clear."""
    data = xla_metrics.metric_data(name)
    if data is None:
        return 0, 0.0
    count, total_ns, _samples = data
    return int(count), float(total_ns) / NANOSECONDS


def start_xla_device() -> None:
    """Register the XLA device with PyTorch (and start the PJRT client)."""
    torch_xla.device()


def set_xla_matmul_precision(precision: str) -> None:
    """torch_xla's own matmul precision: default (one bf16 pass), high (three) or highest."""
    import torch_xla.backends

    torch_xla.backends.set_mat_mul_precision("default" if precision == "medium" else precision)


class XlaPreparedModel(TorchPreparedModel):
    """A torch module on the XLA device; lazy (sync per iteration) or wrapped by dynamo.

    Trace time is the host time spent in `step` (building the lazy graph, or dynamo guards
    and dispatch), without the synchronization that compiles and executes it.
    """

    def __init__(
        self,
        bench: BenchmarkModel,
        experiment: ExperimentConfig,
        wrap: Optional[Callable[[torch.nn.Module], Callable]] = None,
        sync_every_iteration: bool = True,
    ) -> None:
        set_xla_matmul_precision(experiment.matmul_precision)
        super().__init__(bench, experiment, torch_xla.device(), wrap)
        self.sync_every_iteration = sync_every_iteration
        self._trace_seconds = 0.0
        self._steps = 0

    def step(self, device_inputs: Any) -> Any:
        start = time.perf_counter()
        result = super().step(device_inputs)
        self._trace_seconds += time.perf_counter() - start
        self._steps += 1
        return result

    def sync_iteration(self) -> None:
        torch_xla.sync()

    def sync_run(self, last_result: Any) -> None:
        if not self.sync_every_iteration:
            # Work traced outside a compiled region (e.g. an optimizer step) is cut here.
            torch_xla.sync()
        xm.wait_device_ops()

    def begin_timed_run(self) -> None:
        xla_metrics.clear_all()
        self._trace_seconds = 0.0
        self._steps = 0

    def end_timed_run(self) -> dict[str, float]:
        metrics: dict[str, float] = {
            "trace_total_time": self._trace_seconds,
            "trace_per_iter_time": self._trace_seconds / max(self._steps, 1),
        }
        for name, prefix in REPORTED_XLA_METRICS:
            count, seconds = xla_metric(name)
            metrics[f"{prefix}_time_s"] = seconds
            metrics[f"{prefix}_number"] = count
        return metrics

    def final_metrics(self) -> dict[str, Any]:
        if self.accelerator_hardware() == "CPU":
            return {}
        try:
            memory = xm.get_memory_info(self.device)
        except Exception:  # not every PJRT plugin reports memory
            return {}
        peak = memory.get("peak_bytes_used") or memory.get("bytes_used")
        return {"peak_device_memory_bytes": int(peak)} if peak else {}

    def xla_metrics_report(self) -> Optional[str]:
        return xla_metrics.metrics_report()

    def fallback_operators(self) -> Optional[set[str]]:
        # torch_xla counts each operator it runs on the CPU under its aten:: name.
        return {name for name in xla_metrics.counter_names() if name.startswith("aten::")}

    @contextlib.contextmanager
    def xla_trace(self, log_dir: str) -> Iterator[None]:
        """torch_xla's profiler (XPlane) around the block, written under `log_dir`."""
        xla_profiler.start_trace(log_dir)
        try:
            yield
        finally:
            xm.wait_device_ops()
            xla_profiler.stop_trace()

    def accelerator_hardware(self) -> str:
        return xm.xla_device_hw(self.device)

    def accelerator_model(self) -> str:
        hardware = self.accelerator_hardware()
        if hardware == "CPU":
            return cpu_model_name()
        return f"{hardware} (PJRT)"
