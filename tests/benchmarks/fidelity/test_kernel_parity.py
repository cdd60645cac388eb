"""benchmarks/fidelity/kernel_parity.py: what a profiled iteration ran, and what differs between
two."""

from __future__ import annotations

import json

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.fidelity import kernel_parity as parity


def cpu_trace(tmp_path, name: str, model: torch.nn.Module, iterations: int = 1):
    """A Chrome trace of `iterations` forwards of `model` on the CPU, as torch.profiler
    writes it."""
    inputs = torch.randn(4, 16)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(iterations):
            model(inputs)
    path = tmp_path / f"{name}.json"
    profiler.export_chrome_trace(str(path))
    return path


def test_a_cpu_profile_gives_its_operators_and_host_time(tmp_path):
    summary = parity.load_summary(cpu_trace(tmp_path, "linear", torch.nn.Linear(16, 8), 3))
    assert summary.operators.counts["aten::linear"] == 3
    assert summary.host_us > 0 and summary.kernels.count == 0 and summary.graph_launches == 0


def test_an_operator_one_side_runs_is_named_with_its_calls(tmp_path):
    plain = parity.load_summary(cpu_trace(tmp_path, "plain", torch.nn.Linear(16, 8)))
    more = parity.load_summary(cpu_trace(
        tmp_path, "more", torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())))
    found = parity.differences(plain, more)
    assert any(line.startswith("host operators, ours only") for line in found)
    assert any(line.strip().startswith("aten::relu x1") for line in found)
    assert parity.differences(plain, plain) == []


def test_kernels_copies_and_graph_launches_are_told_apart():
    def event(category, name, start, duration):
        return {"ph": "X", "cat": category, "name": name, "ts": start, "dur": duration}

    trace = {"traceEvents": [
        event("cpu_op", "aten::mm", 0, 10), event("cuda_runtime", "cudaLaunchKernel", 2, 3),
        event("cuda_runtime", "cudaGraphLaunch", 12, 4), event("kernel", "gemm", 5, 20),
        event("kernel", "gemm", 30, 22), event("kernel", "triton_poi_fused_add_0", 60, 5),
        event("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 1, 7),
        event("gpu_memset", "Memset (Device)", 2, 1),
        event("cuda_runtime", "cudaDeviceSynchronize", 16, 84),
        {"ph": "M", "name": "process_name", "args": {"name": "python"}}]}
    summary = parity.summarize(trace)
    assert summary.kernels.counts == {"gemm": 2, "triton_poi_fused_add_0": 1}
    assert summary.kernels.time_us["gemm"] == 42 and summary.kernels.total_us == 47
    assert (summary.memcpy.count, summary.memset.count) == (1, 1)
    assert summary.graph_launches == 1 and summary.host_us == 100
    fewer = parity.summarize({"traceEvents": trace["traceEvents"][:4]})
    found = parity.differences(summary, fewer)
    assert "kernels, counts differ: 1 names" in found and "    gemm: x2 vs x1" in found
    assert "CUDA-graph launches: 1 vs 1" not in found
    assert any(line.startswith("kernels, harness only: 1 names") for line in found)
    assert any(line.startswith("memcpy, harness only") for line in found)


def test_two_traces_compare_from_the_command_line(tmp_path, capsys):
    plain = cpu_trace(tmp_path, "plain", torch.nn.Linear(16, 8))
    assert parity.main(["--traces", str(plain), str(plain)]) == 0
    out = capsys.readouterr().out
    assert "host time of the iteration" in out and "the same kernels, copies" in out
    assert parity.main(["--traces", str(plain), str(tmp_path / "none.json")]) == 2
    assert parity.main(["--case", "timm m 8 fp8 default eval"]) == 2
    assert json.loads(plain.read_text())["traceEvents"]


def test_a_kernel_tuned_to_another_launch_shape_is_named_with_both_shapes():
    def launch(name, start, duration, grid, block=(128, 1, 1)):
        return {"ph": "X", "cat": "kernel", "name": name, "ts": start, "dur": duration,
                "args": {"grid": list(grid), "block": list(block)}}

    harness = parity.summarize({"traceEvents": [
        launch("triton_red_fused_mean_0", 0, 54, (288, 1, 1), (512, 1, 1)),
        launch("triton_poi_fused_add_1", 60, 9, (13, 120, 1)),
        launch("gemm", 70, 30, (64, 1, 1))]})
    ours = parity.summarize({"traceEvents": [
        launch("triton_red_fused_mean_0", 0, 303, (9216, 1, 1), (512, 1, 1)),
        launch("triton_poi_fused_add_1", 310, 34, (1, 7680, 1)),
        launch("gemm", 350, 31, (64, 1, 1))]})
    assert harness.shapes["gemm"] == {"grid [64, 1, 1] block [128, 1, 1]": 1}
    found = parity.differences(harness, ours)
    assert ("kernels launched with other grids or blocks: 2 of 3 names run alike, "
            "0.063 vs 0.337 ms (harness vs ours)") in found
    first = found.index("kernels launched with other grids or blocks: 2 of 3 names run alike, "
                        "0.063 vs 0.337 ms (harness vs ours)") + 1
    assert found[first] == ("    triton_red_fused_mean_0: 0.054 vs 0.303 ms, grid [288, 1, 1] "
                            "block [512, 1, 1] vs grid [9216, 1, 1] block [512, 1, 1]")
    assert found[first + 1].startswith("    triton_poi_fused_add_1: 0.009 vs 0.034 ms")
    assert not any("gemm:" in line and "grid" in line for line in found)
    assert parity.shape_differences(harness, harness, 15) == []
    no_args = parity.summarize({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 0, "dur": 30}]})
    assert no_args.shapes == {} and parity.shape_differences(no_args, ours, 15) == []
