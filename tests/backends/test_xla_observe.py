"""Observability hooks of the PyTorch/XLA stack, in a real child with torch_xla on CPU.

A module with an operator PyTorch/XLA does not lower (torch.histc) shows that the profiler
reports the operators that fell back to the CPU, and nothing else.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from core.config import ExperimentConfig, RunSettings
import backends
from observers import observability_environment
from tests.conftest import PROJECT_ROOT, cli_environment

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(importlib.util.find_spec("torch_xla") is None,
                                 reason="torch_xla is not installed")]

LAZY = ExperimentConfig("cpu", "PJRT", None, None, "eval", stack="xla_lazy")
SETTINGS = RunSettings(repeat=2, warmup=1, observe={"profile_cuda_cpu_individual_ops": True,
                       "dump_pytorch_xla_metrics": True, "save_ir_format": "text"})

CHILD = """
import json, sys
from pathlib import Path
import torch
from backends.runtimes.torch_xla import XlaPreparedModel
from models.base import BenchmarkModel, ModelInputs
from core.config import ExperimentConfig, RunSettings
from observers.session import ExperimentObservers
from child.timing import measure

class Histogram(torch.nn.Module):
    def forward(self, x):
        return torch.histc(x, bins=4).sum() + x.sum()

def inputs(seed):
    return ModelInputs((torch.randn(64, generator=torch.Generator().manual_seed(seed)),), {})

spec = json.loads(sys.argv[1])
experiment = ExperimentConfig.from_dict(spec["experiment"])
settings = RunSettings.from_dict(spec["settings"])
bench = BenchmarkModel("histogram", Histogram(), inputs, None, 64)
import backends
observers = ExperimentObservers(backends.get_stack(experiment.stack), experiment, settings,
                                Path(spec["dir"]))
prepared = XlaPreparedModel(bench, experiment, sync_every_iteration=True)
observers.attach(prepared)
measure(prepared, bench, settings, observers)
metrics = observers.metrics()
print("RESULT " + json.dumps({"metrics": metrics, "summary": observers.summary(),
                              "notes": observers.notes}))
"""


@pytest.fixture(scope="module")
def xla_child(tmp_path_factory):
    directory = tmp_path_factory.mktemp("xla-observe")
    environment = cli_environment()
    environment.update(PJRT_DEVICE="CPU", XLA_DISABLE_FUNCTIONALIZATION="1")
    environment.update(observability_environment(backends.get_stack(LAZY.stack), SETTINGS,
                                                 directory, environment))
    spec = {"experiment": LAZY.to_dict(), "settings": SETTINGS.to_dict(), "dir": str(directory)}
    completed = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)],
                               capture_output=True, text=True, timeout=300, env=environment,
                               cwd=str(PROJECT_ROOT))
    assert completed.returncode == 0, completed.stderr[-3000:]
    line = next(l for l in completed.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):]), directory


def test_only_the_operators_that_fell_back_are_profiled(xla_child):
    result, _ = xla_child
    assert result["notes"] == []
    # PyTorch/XLA's name and shape: one dict per profiled run, of the operators not lowered.
    per_run = result["summary"]["xla_unlowered_ops"]
    assert [list(ops) for ops in per_run] == [["aten::histc"], ["aten::histc"]]
    for ops in per_run:
        assert ops["aten::histc"]["num_of_calls"] == 1  # one iteration each
        assert ops["aten::histc"]["total_cpu_time_s"] > 0


def test_metrics_report_per_timed_run(xla_child):
    _, directory = xla_child
    for index in range(2):
        report = (directory / f"run-{index}" / "xla_metrics.txt").read_text()
        assert "Metric: ExecuteTime" in report or "Counter: ExecuteComputation" in report
        assert "aten::histc" in report  # the fallback is counted in the run's report


def test_lazy_ir_text_holds_every_graph(xla_child):
    _, directory = xla_child
    (path,) = (directory / "ir").glob("graphs.text.txt*")
    text = path.read_text()
    assert text.count("## BEGIN_GRAPH") >= 3  # warm-up and timed iterations at least
    assert "IR {" in text and "aten::sum" in text
