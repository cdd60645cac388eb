"""child/device_busy.py: the device's busy time per iteration, summed from a profiler trace.

On the CPU the "device" is the CPU's own matrix products (aten::addmm), so that the same
profiling, marking and summing runs on a real model here as it does with CUDA's kernels."""

from __future__ import annotations

import statistics

import pytest

from child.device_busy import (MARK, BusyActivity, busy_from_trace, measure_device_busy,
                               reason_not_measured)
from child.timing import measure
from core.config import ExperimentConfig, RunSettings

#: The CPU stand-in for a device: the matrix products, which do not nest in one another.
CPU_MATMULS = BusyActivity(("CPU",), ("cpu_op",), frozenset({"aten::addmm"}))


def event(category, name, start, duration):
    return {"ph": "X", "cat": category, "name": name, "ts": start, "dur": duration}


def test_each_iterations_kernels_are_summed_from_a_recorded_trace():
    """A trace as torch.profiler writes it on CUDA: host marks, then kernels on the device's
    clock, each starting after its iteration's mark and before the next one."""
    trace = {"traceEvents": [
        event("kernel", "warm_up_gemm", 5, 100),  # before the first mark: not counted
        event("user_annotation", f"{MARK}0", 1000, 500),
        event("gpu_user_annotation", f"{MARK}0", 1010, 480),  # the mark on the device
        event("kernel", "gemm", 1020, 200), event("kernel", "triton_poi_fused_add_0", 1230, 50),
        event("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 1300, 10),
        event("cuda_runtime", "cudaLaunchKernel", 1010, 5),
        event("user_annotation", f"{MARK}1", 2000, 400),
        event("kernel", "gemm", 2010, 210), event("kernel", "triton_poi_fused_add_0", 2230, 50),
        event("user_annotation", f"{MARK}2", 3000, 400),
        # the device's clock may put a kernel's start past its mark's end: it still counts
        event("kernel", "gemm", 3390, 190), event("kernel", "triton_poi_fused_add_0", 3590, 30),
        {"ph": "M", "name": "process_name", "args": {"name": "python"}}]}
    busy = busy_from_trace(trace)
    assert busy["iterations_ms"] == pytest.approx([0.25, 0.26, 0.22])
    assert busy["ms"] == pytest.approx(0.25) and busy["kernels"] == 2
    assert busy["memcpy_ms"] == pytest.approx(0.0) and busy["memset_ms"] == 0
    assert busy["reason"] is None
    unmarked = busy_from_trace({"traceEvents": trace["traceEvents"][:1]})
    assert unmarked["ms"] is None and "marked" in unmarked["reason"]
    assert busy["digests"] is None  # these kernels carry no grid or block


def launched(name, start, duration, grid, block=(128, 1, 1)):
    return {**event("kernel", name, start, duration),
            "args": {"grid": list(grid), "block": list(block)}}


def test_the_first_iterations_kernels_and_their_launch_shapes_are_digested():
    """Two compiles of one graph launch the same kernels (one `kernels` digest); where the
    tuning kept another configuration for a kernel its grid or block differs (`launches`)."""
    def trace(reduction_grid, extra=()):
        return {"traceEvents": [
            launched("warm_up", 5, 100, (1, 1, 1)),  # before the first mark: not digested
            event("user_annotation", f"{MARK}0", 1000, 500),
            launched("triton_red_fused_mean_0", 1020, 54, reduction_grid, (512, 1, 1)),
            launched("gemm", 1100, 30, (64, 1, 1)), *extra,
            event("user_annotation", f"{MARK}1", 2000, 400),
            launched("triton_red_fused_mean_0", 2020, 54, reduction_grid, (512, 1, 1)),
            launched("gemm", 2100, 30, (64, 1, 1)),
            launched("only_in_the_second_iteration", 2200, 5, (1, 1, 1))]}

    first = busy_from_trace(trace((288, 1, 1)))["digests"]
    assert first["count"] == 2 and len(first["kernels"]) == len(first["launches"]) == 16
    assert busy_from_trace(trace((288, 1, 1)))["digests"] == first
    retuned = busy_from_trace(trace((9216, 1, 1)))["digests"]
    assert retuned["kernels"] == first["kernels"] and retuned["launches"] != first["launches"]
    other = busy_from_trace(trace((288, 1, 1), [launched("gemm", 1200, 30, (64, 1, 1))]))
    assert other["digests"]["kernels"] != first["kernels"] and other["digests"]["count"] == 3
    assert busy_from_trace(trace((288, 1, 1)), CPU_MATMULS)["digests"] is None


def test_a_real_models_profiled_iterations_are_summed_one_by_one():
    import torch

    layers = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                 torch.nn.ReLU(), torch.nn.Linear(64, 8))
    inputs = torch.randn(32, 64)
    calls = []

    def run_once():
        calls.append(1)
        with torch.no_grad():
            return layers(inputs)

    busy = measure_device_busy(run_once, iterations=4, activity=CPU_MATMULS)
    assert len(calls) == 4 and len(busy["iterations_ms"]) == 4
    assert busy["kernels"] == 3  # one matrix product per Linear, in every iteration
    assert busy["ms"] == statistics.median(busy["iterations_ms"]) > 0
    assert busy["probe_s"] > 0 and busy["reason"] is None


def test_a_failing_profiler_gives_no_figure_and_the_reason():
    def run_once():
        raise RuntimeError("the card fell off")

    busy = measure_device_busy(run_once, iterations=2, activity=CPU_MATMULS)
    assert busy["ms"] is None and "the card fell off" in busy["reason"]


def test_only_cuda_stacks_on_torchs_streams_are_measured():
    assert "on cpu" in reason_not_measured("cpu", has_device_timer=False)
    assert "streams" in reason_not_measured("cuda", has_device_timer=False)
    assert reason_not_measured("cuda", has_device_timer=True) is None


def test_the_busy_time_is_measured_after_the_timed_runs_for_the_stack_and_paired_eager():
    """The builtin suite's mlp, eager paired with itself on the CPU: the probe runs after
    every timed run, once for the stack and once for eager, and the line holds both."""
    from backends import get_stack
    from models import get_suite

    settings = RunSettings(repeat=2, warmup=1)
    experiment = ExperimentConfig("cpu", None, None, None, "eval")
    bench = get_suite("builtin").load("mlp", "eval", 4, seed=0)
    stack = get_stack("eager")
    prepared, reference = (stack.prepare(bench, experiment, settings) for _ in range(2))
    probes = []

    def probe(run_once):
        probes.append(len(timing_runs))
        return measure_device_busy(run_once, iterations=2, activity=CPU_MATMULS)

    timing_runs = []
    original = prepared.begin_timed_run
    prepared.begin_timed_run = lambda: (timing_runs.append(1), original())[1]
    timing = measure(prepared, bench, settings, reference=reference, device_busy=probe)
    summary = timing.summary()
    assert probes == [3, 3]  # the cold-start run and both timed runs came first
    assert summary["device_busy_ms"] > 0 and summary["eager_device_busy_ms"] > 0
    assert summary["device_busy"]["kernels"] == summary["device_busy"]["eager"]["kernels"] > 0
