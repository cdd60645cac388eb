"""PyTorch/XLA lazy tensor (xla=PJRT, dynamo=None) end to end on CPU, with its metrics."""

from __future__ import annotations

from backends.stacks.xla_lazy import XlaLazyStack
from core.config import ExperimentConfig
from tests.backends.conftest import RUNS, assert_per_run, by_key, describe_failures

import pytest

XLA_METRICS = (
    "trace_total_time", "trace_per_iter_time", "xla_CompileTime_time_s",
    "xla_CompileTime_number", "xla_ExecuteTime_time_s", "xla_ExecuteTime_number",
)


def lazy(**kwargs) -> ExperimentConfig:
    return ExperimentConfig("cpu", "PJRT", None, None, kwargs.pop("test", "eval"), **kwargs)


def test_owns_pjrt_without_dynamo_or_torchax_only():
    backend = XlaLazyStack()
    assert backend.handles(lazy())
    assert not backend.handles(ExperimentConfig("cpu", "PJRT", "openxla", None, "eval"))
    assert not backend.handles(ExperimentConfig("cpu", None, None, None, "eval"))
    assert not backend.handles(ExperimentConfig("cpu", "PJRT", None, "extract_jax", "eval"))


def test_child_environment_sets_device_functionalization_and_flags():
    backend = XlaLazyStack()
    assert backend.child_environment(lazy()) == {
        "PJRT_DEVICE": "CPU", "XLA_DISABLE_FUNCTIONALIZATION": "1"}
    flagged = lazy(xla_flags="--xla_cpu_enable_fast_math=false", enable_functionalization=True)
    assert backend.child_environment(flagged) == {
        "PJRT_DEVICE": "CPU", "XLA_FLAGS": "--xla_cpu_enable_fast_math=false"}
    tpu = ExperimentConfig("tpu", "PJRT", None, None, "train")
    assert backend.child_environment(tpu)["PJRT_DEVICE"] == "TPU"


@pytest.mark.e2e
def test_mlp_eval_and_train_write_xla_metrics_per_timed_run(sweep, tmp_path):
    dump = tmp_path / "xla-dump"
    lines = sweep("--xla=PJRT", "--dynamo=None", "--test=eval", "--test=train", "-k", "^mlp$",
                  f"--xla-flags=--xla_dump_to={dump}")
    assert len(lines) == 2, lines
    assert not describe_failures(lines), describe_failures(lines)
    for (_, test), line in by_key(lines).items():
        metrics = line["metrics"]
        assert_per_run(metrics, XLA_METRICS + ("per_iter_time",), runs=RUNS)
        assert all(n >= 1 for n in metrics["xla_ExecuteTime_number"]), metrics
        assert all(t > 0 for t in metrics["trace_total_time"]), metrics
        assert line["summary"]["cold_start_time"] > 0
        assert line["environment"]["torch_settings"]["xla_matmul_precision"] == "high"
        # The cold-start run compiled; the timed runs found their graphs cached.
        assert metrics["xla_CompileTime_number"][0] >= 1, metrics
        variables = line["environment"]["variables"]
        assert variables["PJRT_DEVICE"] == "CPU"
        assert variables["XLA_DISABLE_FUNCTIONALIZATION"] == "1"
        assert variables["XLA_FLAGS"] == f"--xla_dump_to={dump}"
        assert line["experiment"]["xla_flags"] == f"--xla_dump_to={dump}"
        assert line["environment"]["torch_xla"]
    # XLA_FLAGS reached the compiler: it dumped the graphs it compiled.
    assert dump.is_dir() and any(dump.iterdir())


@pytest.mark.e2e
def test_every_builtin_model_runs_in_train(sweep):
    lines = sweep("--xla=PJRT", "--dynamo=None", "--test=train", "-x", "^mlp$")
    assert {line["model"]["model_name"] for line in lines} == {"cnn", "transformer_block"}
    assert not describe_failures(lines), describe_failures(lines)
    for line in lines:
        assert_per_run(line["metrics"], XLA_METRICS, runs=RUNS)
