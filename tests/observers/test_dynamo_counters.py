"""Dynamo's counters in this process: a compiled function with a graph break."""

import json

import pytest

torch = pytest.importorskip("torch")

from observers.dynamo_counters import (  # noqa: E402
    DynamoCountersObserver,
    counters_change,
    short_reason,
)


@pytest.fixture
def fresh_dynamo():
    from torch._dynamo.utils import clear_compilation_metrics, counters

    torch._dynamo.reset()
    counters.clear()
    clear_compilation_metrics()
    yield
    torch._dynamo.reset()


def breaking(x):
    x = x.sin()
    torch._dynamo.graph_break()
    return x.cos()


@pytest.mark.e2e
def test_graph_breaks_reasons_and_graphs_are_counted(fresh_dynamo, tmp_path):
    compiled = torch.compile(breaking, backend="aot_eager")
    observer = DynamoCountersObserver(tmp_path, collect=True, dump=True, warmup=1)
    compiled(torch.randn(4))  # the warm-up: dynamo compiles here
    observer.before_timed_run(0)
    compiled(torch.randn(4))
    observer.after_timed_run(0)
    observer.before_timed_run(1)
    compiled(torch.randn(4, 2))  # a new shape: dynamo compiles again
    observer.after_timed_run(1)
    assert observer.metrics() == {}  # nothing per run that PyTorch/XLA's tools could average
    summary = observer.summary()
    assert summary["dynamo_graph_breaks"] >= 1
    assert summary["dynamo_graph_count"] == 2
    assert summary["dynamo_unique_graphs"] >= 3
    assert summary["dynamo_recompiles"] >= 1
    (reason, count), = summary["dynamo_graph_break_reasons"].items()
    assert count == summary["dynamo_graph_breaks"] and "\n" not in reason
    # One entry per run, as PyTorch/XLA's runner: the warm-up's, then each timed run's.
    warmup, run0, run1 = summary["dynamo_counters"]
    assert warmup["stats"]["unique_graphs"] >= 2 and run0 == {}
    assert run1["stats"]["unique_graphs"] >= 1
    assert summary["dynamo_compile_times_s"] and all(
        v >= 0 for v in summary["dynamo_compile_times_s"].values())
    first = json.loads((tmp_path / "run-0" / "dynamo_counters.json").read_text())
    second = json.loads((tmp_path / "run-1" / "dynamo_counters.json").read_text())
    assert first["run"] == 0 and first["changed_in_run"] == {}  # nothing compiled in run 0
    assert second["changed_in_run"] == run1
    assert second["counters"]["stats"]["unique_graphs"] == summary["dynamo_unique_graphs"]


def test_without_warmup_the_list_has_one_entry_per_timed_run(fresh_dynamo, tmp_path):
    compiled = torch.compile(lambda x: x * 2, backend="eager")
    observer = DynamoCountersObserver(tmp_path, collect=True, dump=False, warmup=0)
    for index in range(2):
        observer.before_timed_run(index)
        compiled(torch.ones(2))
        observer.after_timed_run(index)
    first, second = observer.summary()["dynamo_counters"]
    assert first["stats"]["unique_graphs"] == 1 and second == {}


def test_without_flags_only_the_summary_is_kept(fresh_dynamo, tmp_path):
    compiled = torch.compile(lambda x: x + 1, backend="eager")
    observer = DynamoCountersObserver(tmp_path, collect=False, dump=False)
    observer.before_timed_run(0)
    compiled(torch.ones(2))
    observer.after_timed_run(0)
    summary = observer.summary()
    assert summary["dynamo_graph_count"] == 1 and summary["dynamo_graph_breaks"] == 0
    assert "dynamo_counters" not in summary
    assert list(tmp_path.iterdir()) == []


def test_counters_change_and_short_reason():
    assert counters_change({"a": {"x": 1}}, {"a": {"x": 3, "y": 0}, "b": {"z": 2}}) == {
        "a": {"x": 2}, "b": {"z": 2}}
    assert short_reason("first line\nsecond") == "first line"
    assert short_reason("  ") == "(no reason given)"
    assert len(short_reason("x" * 1000)) == 300
