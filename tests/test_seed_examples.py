"""Seed 003's examples (PyTorch/XLA's runner documentation) expand exactly as documented.

The seed's machine has CUDA and a PyTorch/XLA that drives it (XLA:CUDA, up to torch_xla 2.8)
and TorchBench with two models, llama and dlrm: its first command runs 8 experiments per
model, 16 in all, its second 2. The plans are built in this process for such a host, with the
command lines parsed by the runner's own parser; the same commands then run as dry runs on
this machine's CPU. PyTorch/XLA's own dry-run tests (suite `dummy`) are checked the same way.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from core.host.machine import HostCapabilities
from models import get_suite
from runner.plan.parser import build_parser, matrix_request
from runner.plan.matrix import build_plan
from tests.conftest import cli_command, cli_environment

SEED_HOST = HostCapabilities(
    torch_version="2.8.0", cuda_available=True, cuda_device_names=("NVIDIA A100-SXM4-40GB",),
    dynamo_backends=("aot_eager", "eager", "inductor", "openxla"),
    packages={"torch": "2.8.0", "torch_xla": "2.8.0"},
)
FIRST = ["--suite-name=torchbench", "--accelerator=cuda"]
SECOND = ["--suite-name=torchbench", "--accelerator=cuda", "--xla=PJRT", "--dynamo=openxla",
          "--dynamo=None", "--test=eval", "--filter=llama"]
#: The seed's list for one model: (xla, dynamo, test), in its order.
PER_MODEL = [
    (None, None, "eval"), (None, None, "train"), (None, "inductor", "eval"),
    (None, "inductor", "train"), ("PJRT", None, "eval"), ("PJRT", None, "train"),
    ("PJRT", "openxla", "eval"), ("PJRT", "openxla", "train"),
]


@pytest.fixture
def torchbench(tmp_path) -> Path:
    """A TorchBench checkout holding the seed's two models (only listed, never built)."""
    for name in ("llama", "dlrm"):
        folder = tmp_path / "torchbench" / "torchbenchmark" / "models" / name
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    return tmp_path / "torchbench"


def plan_for(argv, host, torchbench_dir=None):
    args = build_parser().parse_args(argv)
    request = matrix_request(args, str(torchbench_dir) if torchbench_dir else None)
    suite = get_suite(args.suite_name, torchbench_dir=request.torchbench_dir)
    return build_plan(suite, request, host)


def triples(plan, model):
    return [(p.experiment.xla, p.experiment.dynamo, p.experiment.test)
            for p in plan.experiments if p.model.model_name == model]


def test_the_first_example_runs_8_experiments_per_model_16_in_all(torchbench):
    plan = plan_for(FIRST, SEED_HOST, torchbench)
    assert len(plan.experiments) == 16 and plan.configuration_count == 8
    for model in ("llama", "dlrm"):
        assert triples(plan, model) == PER_MODEL
    assert {p.experiment.torch_xla2 for p in plan.experiments} == {None}
    assert {p.experiment.accelerator for p in plan.experiments} == {"cuda"}


def test_the_second_example_runs_llama_inference_on_pjrt_with_and_without_dynamo(torchbench):
    plan = plan_for(SECOND, SEED_HOST, torchbench)
    assert sorted(triples(plan, "llama"), key=str) == sorted(
        [("PJRT", None, "eval"), ("PJRT", "openxla", "eval")], key=str)
    assert len(plan.experiments) == 2


@pytest.mark.parametrize("argv, count", [
    # PyTorch/XLA's test_dummy_dry_run and test_dummy_dry_run_with_functionalization (CPU),
    (["--dynamo=openxla", "--dynamo=inductor", "--xla=PJRT", "--xla=None", "--test=eval",
      "--test=train", "--suite-name=dummy", "--accelerator=cpu"], 4),
    (["--dynamo=openxla", "--xla=PJRT", "--test=eval", "--test=train", "--suite-name=dummy",
      "--accelerator=cpu", "--enable-functionalization"], 2),
    # and its CUDA ones: test_dummy_dynamo_none_cuda, test_dummy_dry_run_inductor_cuda.
    (["--suite-name=dummy", "--accelerator=cuda", "--xla=PJRT", "--xla=None",
      "--filter=^dummy$"], 8),
    (["--dynamo=inductor", "--xla=PJRT", "--xla=None", "--test=eval", "--test=train",
      "--suite-name=dummy", "--accelerator=cuda", "--filter=^dummy$"], 2),
])
def test_the_peers_own_dry_runs_of_the_dummy_suite(argv, count):
    plan = plan_for(argv, SEED_HOST)
    assert plan.model_names == ["dummy"] and len(plan.experiments) == count


def dry_run(tmp_path, *argv):
    completed = subprocess.run(cli_command(tmp_path / "out", *argv, "--dry-run"),
                               capture_output=True, text=True, env=cli_environment(), timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed


@pytest.mark.e2e
@pytest.mark.skipif(importlib.util.find_spec("torch_xla") is None,
                    reason="PJRT experiments need torch_xla here (the project's xla extra)")
def test_the_examples_dry_run_here_on_the_cpu(tmp_path, torchbench):
    """The seed's commands with this machine's accelerator: the same counts."""
    first = dry_run(tmp_path, "--suite-name=torchbench", f"--torchbench-dir={torchbench}",
                    "--accelerator=cpu")
    assert "16 experiment(s) would run" in first.stdout
    assert "Number of selected experiment configs: 8" in first.stderr
    assert "Number of selected model configs: 2" in first.stderr
    second = dry_run(tmp_path, "--suite-name=torchbench", f"--torchbench-dir={torchbench}",
                     "--accelerator=cpu", *SECOND[2:])
    assert "2 experiment(s) would run" in second.stdout
    # Every experiment comes with the flags that run exactly it, to copy and paste.
    configs = re.findall(r"^  (--model-config=.*)$", first.stdout, re.MULTILINE)
    assert len(configs) == 16
    model_flag, experiment_flag = shlex.split(configs[0])
    assert json.loads(model_flag.split("=", 1)[1]) == {"suite_name": "torchbench",
                                                       "model_name": "dlrm", "reduced": False}
    assert json.loads(experiment_flag.split("=", 1)[1]) == {
        "accelerator": "cpu", "xla": None, "xla_flags": None, "dynamo": None,
        "torch_xla2": None, "test": "eval", "keep_model_data_on_cuda": False,
        "enable_functionalization": False,
        # Then every other identity field with its value (core.fields), so the flags run the
        # same experiment whatever the defaults of the version reading them.
        "precision": "fp32", "batch_size": None, "matmul_precision": "high",
        "disable_tf32": False, "fp16_bf16_reduction_math_sdp": True, "mode": None,
        "optimizer": None, "amp_dtype": None, "fullgraph": False, "freezing": False,
        "stack_options": {}, "point": None,
        "seed": 1234}
    again = dry_run(tmp_path, "--suite-name=torchbench", f"--torchbench-dir={torchbench}",
                    *shlex.split(configs[-1]))
    assert "1 experiment(s) would run" in again.stdout
    assert again.stdout.splitlines()[1] == "  " + configs[-1]
