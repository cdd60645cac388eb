"""Profiled runs in this process on an eager CPU module."""

import json

import pytest

torch = pytest.importorskip("torch")

from observers.profiler import ProfilerObserver  # noqa: E402


def make_run():
    layer = torch.nn.Linear(32, 32)
    inputs = torch.randn(8, 32)

    def run_once():
        with torch.no_grad():
            for _ in range(3):
                layer(inputs).relu()

    return run_once


def observer(tmp_path, fallbacks=None, **flags):
    options = dict(totals=False, individual_ops=False, dump=False)
    options.update(flags)
    return ProfilerObserver(tmp_path, runs=2, iterations_per_run=3, device_type="cpu",
                            fallback_operators=lambda: fallbacks, **options)


def test_totals_per_profiled_run(tmp_path):
    profiler = observer(tmp_path, totals=True)
    profiler.after_timed_runs(make_run(), [])
    metrics = profiler.metrics()
    assert len(metrics["total_cpu_time_s"]) == 2 and all(t > 0 for t in metrics["total_cpu_time_s"])
    for total, per_iter in zip(metrics["total_cpu_time_s"], metrics["per_iter_cpu_time_s"]):
        assert per_iter == pytest.approx(total / 3)
    assert "total_cuda_time_s" not in metrics  # no CUDA work on a CPU stack
    assert list(tmp_path.iterdir()) == []


def test_individual_aten_ops_are_inductor_ops_per_profiled_run(tmp_path):
    profiler = observer(tmp_path, individual_ops=True)
    profiler.after_timed_runs(make_run(), [])
    assert profiler.metrics() == {}  # operators are not per-run numbers: they go to the summary
    per_run = profiler.summary()["inductor_ops"]
    assert len(per_run) == 2  # one dict per profiled run, as PyTorch/XLA's runner per repeat
    for ops in per_run:
        assert "aten::addmm" in ops and all(name.startswith("aten::") for name in ops)
        assert ops["aten::relu"]["num_of_calls"] == 3  # 3 iterations in each profiled run
        row = ops["aten::addmm"]
        assert row["total_cpu_time_s"] >= row["self_cpu_time_s"] > 0
        assert row["self_cuda_time_s"] == 0


def test_fallback_operators_are_xla_unlowered_ops(tmp_path):
    profiler = observer(tmp_path, fallbacks={"aten::relu"}, individual_ops=True)
    profiler.after_timed_runs(make_run(), [])
    summary = profiler.summary()
    assert "inductor_ops" not in summary
    assert [list(ops) for ops in summary["xla_unlowered_ops"]] == [["aten::relu"], ["aten::relu"]]


def test_dumps_a_chrome_trace_and_a_table_per_run(tmp_path):
    profiler = observer(tmp_path, dump=True)
    profiler.after_timed_runs(make_run(), [])
    for index in range(2):
        trace = json.loads((tmp_path / f"run-{index}" / "trace.json").read_text())
        names = {event.get("name") for event in trace["traceEvents"]}
        assert "aten::addmm" in names
        assert "aten::addmm" in (tmp_path / f"run-{index}" / "profile.txt").read_text()
    assert profiler.metrics() == {} and profiler.summary() == {}
