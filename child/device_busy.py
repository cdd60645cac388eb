"""The device's busy time per iteration: its kernels' time, summed (child side).

A host-bound model's latency is the host's speed; the time its kernels take on the card is
not. After the timed runs (never inside them, so the profiler's cost reaches no timed
figure) the child runs a few more iterations under torch.profiler, each ended by the stack's
synchronization and marked by an annotation, and sums the durations of the kernels each
iteration ran (observers/trace_sums.py, the sums benchmarks/fidelity/kernel_parity.py reads the two
tools' traces with). The line's `summary.device_busy_ms` is the median over those
iterations (over processes, the median of the processes'), `summary.device_busy` keeps each
iteration's sum, the kernel count and what the probe cost, and `digests` of what the first
probed iteration launched (`kernels`: the kernels' names and counts; `launches`: with each
launch's grid and block), which tell two lines' compiled code apart: the same `kernels` with
other `launches` is the same code tuned otherwise (reports/analyse/compare.py says so).

Kernels that overlap (several streams) are each counted whole: the sum is the device's work,
not the span it covered. Copies and memsets are kept apart (`memcpy_ms`, `memset_ms`).
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from observers.trace_sums import KERNEL, MEMCPY, MEMSET, iteration_tallies, kernel_digests

log = logging.getLogger(__name__)

#: Profiled iterations after the timed runs.
ITERATIONS = 3
#: The annotation that marks a profiled iteration (its number follows).
MARK = "experiment_runner.device_busy."


@dataclass(frozen=True)
class BusyActivity:
    """What the profiler records (torch.profiler.ProfilerActivity names) and which of its
    trace's events are the device's work: their categories, and where given only these
    names (a CPU stand-in for tests)."""

    activities: tuple[str, ...]
    categories: tuple[str, ...]
    names: Optional[frozenset[str]] = None


#: On CUDA: the kernels CUPTI records (host events too, for the iterations' marks).
CUDA_KERNELS = BusyActivity(("CPU", "CUDA"), (KERNEL,))


def not_measured(reason: str) -> dict[str, Any]:
    """`summary.device_busy` where there is no figure, with the reason."""
    return {"ms": None, "reason": reason}


def reason_not_measured(accelerator: str, has_device_timer: bool) -> Optional[str]:
    """Why a line gets no device busy time; None where it does (CUDA, a stack whose work
    runs on torch's CUDA streams)."""
    if accelerator != "cuda":
        return (f"no device kernels to sum on {accelerator}: the device busy time is measured "
                "on CUDA")
    if not has_device_timer:
        return ("the stack's work does not run on torch's CUDA streams, whose kernels "
                "torch.profiler records")
    return None


def _profile(run_once: Callable[[], Any], iterations: int, activity: BusyActivity) -> Any:
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [getattr(ProfilerActivity, name) for name in activity.activities]
    with profile(activities=activities) as profiler:
        for index in range(iterations):
            with record_function(f"{MARK}{index}"):
                run_once()
    folder = tempfile.mkdtemp(prefix="device-busy-")
    path = os.path.join(folder, "trace.json")
    try:
        profiler.export_chrome_trace(path)
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    finally:
        if os.path.exists(path):
            os.remove(path)
        os.rmdir(folder)


def busy_from_trace(trace: Any, activity: BusyActivity = CUDA_KERNELS) -> dict[str, Any]:
    """`summary.device_busy` from a trace of marked iterations: the median iteration's
    summed kernel time (ms), each iteration's, the median kernel count, and the median of
    copies' and memsets' time; no figure where the trace marks no iteration."""
    tallies = iteration_tallies(trace, MARK, activity.categories, activity.names)
    if not tallies:
        return not_measured("the profiler's trace holds none of the marked iterations")
    sums = [tally.total_us / 1e3 for tally in tallies]
    copies = {kind: statistics.median(tally.total_us / 1e3 for tally in
                                      iteration_tallies(trace, MARK, (kind,)))
              for kind in (MEMCPY, MEMSET)} if activity.names is None else {}
    return {"ms": statistics.median(sums), "iterations_ms": sums,
            "kernels": statistics.median(tally.count for tally in tallies),
            "memcpy_ms": copies.get(MEMCPY), "memset_ms": copies.get(MEMSET),
            "digests": kernel_digests(trace, MARK) if activity.names is None else None,
            "reason": None}


def measure_device_busy(run_once: Callable[[], Any], iterations: int = ITERATIONS,
                        activity: BusyActivity = CUDA_KERNELS) -> dict[str, Any]:
    """`iterations` runs of `run_once` (one iteration and the stack's synchronization) under
    torch.profiler, each marked; the device's busy time per iteration (`busy_from_trace`)
    and the probe's wall time (`probe_s`). A profiler that fails gives no figure and the
    reason, never a failed experiment."""
    began = time.perf_counter()
    try:
        trace = _profile(run_once, iterations, activity)
    except Exception as error:  # the line matters more than this figure
        log.warning("no device busy time: %s: %s", type(error).__name__, error)
        return not_measured(f"the profiler failed: {type(error).__name__}: {error}"[:300])
    busy = busy_from_trace(trace, activity)
    busy["probe_s"] = time.perf_counter() - began
    return busy
