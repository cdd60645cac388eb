"""torch.compile(backend="openxla") on the XLA device, end to end on CPU."""

from __future__ import annotations

import torch

from core.host.machine import HostCapabilities
from backends.stacks.openxla import OpenXlaStack
from core.config import ExperimentConfig
from tests.backends.conftest import RUNS, assert_per_run, describe_failures
from tests.backends.test_xla_lazy import XLA_METRICS

import pytest

HOST = HostCapabilities(
    torch_version=torch.__version__, packages={"torch_xla": torch.__version__.split("+")[0]},
    dynamo_backends=("inductor", "openxla", "openxla_eval"),
)


def openxla(dynamo="openxla", test="eval") -> ExperimentConfig:
    return ExperimentConfig("cpu", "PJRT", dynamo, None, test)


def test_rejects_dynamo_backends_that_do_not_target_xla():
    reason = OpenXlaStack().invalid_reason(openxla("inductor"), HOST)
    assert reason == ("dynamo=inductor does not compile for the XLA device; "
                      "with xla=PJRT use dynamo=openxla")
    assert "inference only" in OpenXlaStack().invalid_reason(openxla("openxla_eval", "train"), HOST)
    assert OpenXlaStack().invalid_reason(openxla(), HOST) is None
    assert OpenXlaStack().invalid_reason(openxla("openxla_eval"), HOST) is None


@pytest.mark.e2e
def test_mlp_eval_and_train_write_xla_metrics(sweep):
    lines = sweep("--xla=PJRT", "--dynamo=openxla", "--test=eval", "--test=train", "-k", "^mlp$")
    assert len(lines) == 2
    assert not describe_failures(lines), describe_failures(lines)
    for line in lines:
        assert line["experiment"]["dynamo"] == "openxla"
        assert_per_run(line["metrics"], XLA_METRICS, runs=RUNS)
        assert all(n >= 1 for n in line["metrics"]["xla_ExecuteTime_number"])
        assert line["environment"]["variables"]["PJRT_DEVICE"] == "CPU"


@pytest.mark.e2e
def test_every_builtin_model_runs_in_eval(sweep):
    lines = sweep("--xla=PJRT", "--dynamo=openxla", "--test=eval", "-x", "^mlp$")
    assert len(lines) == 2
    assert not describe_failures(lines), describe_failures(lines)
