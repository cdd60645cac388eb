"""runner/child/worker.py: where the child builds its model."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
import torch

import backends
from core.config import ExperimentConfig
from core.contract import Role
from runner.child.worker import build_device


def experiment(accelerator: str, dynamo=None, torch_xla2=None) -> ExperimentConfig:
    planned = ExperimentConfig(accelerator, None, dynamo, torch_xla2, "eval")
    return dataclasses.replace(planned, stack=backends.stack_for(planned).name)


@pytest.mark.parametrize("dynamo", [None, "inductor"])
def test_torch_stacks_on_cuda_build_on_the_device(dynamo):
    planned = experiment("cuda", dynamo)
    assert build_device(backends.get_stack(planned.stack), planned) == torch.device("cuda")


@pytest.mark.parametrize("accelerator, dynamo, torch_xla2", [
    ("cpu", "inductor", None),
    ("cpu", None, None),
    ("cuda", None, "torch_export"),
])
def test_other_children_build_on_the_cpu(accelerator, dynamo, torch_xla2):
    planned = experiment(accelerator, dynamo, torch_xla2)
    assert isinstance(build_device(backends.get_stack(planned.stack), planned),
                      contextlib.nullcontext)


def test_the_verification_child_builds_on_the_cpu_whatever_the_stack():
    planned = experiment("cuda", "inductor")
    assert isinstance(build_device(backends.get_stack(planned.stack), planned, Role.VERIFY),
                      contextlib.nullcontext)
