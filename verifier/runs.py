"""Child-side helpers that turn a suite model and a stack into the callables `verify` takes.

Optional: the worker may build its callables itself. Each callable reseeds torch, loads a
fresh model, prepares it, runs `iterations` steps on the inputs of `seed` and returns the
last step's result on the CPU.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import torch

from backends.base import PreparedModel
from backends.torch_native import TorchPreparedModel
from models.base import BenchmarkModel, ModelInputs
from runner.config import ExperimentConfig
from runner.precision import cast_floating


def reference_experiment(experiment: ExperimentConfig) -> ExperimentConfig:
    """Eager on the experiment's native device (CPU for TPU), same test, precision and batch."""
    accelerator = "cpu" if experiment.accelerator == "tpu" else experiment.accelerator
    return dataclasses.replace(experiment, accelerator=accelerator, xla=None, dynamo=None,
                               torch_xla2=None, xla_flags=None, enable_functionalization=False)


def run_steps(prepared: PreparedModel, bench: BenchmarkModel, seed: int, iterations: int = 1) -> Any:
    """`iterations` steps on the inputs of `seed`; the last step's result on the CPU."""
    if iterations < 1:
        raise ValueError(f"verify iterations must be at least 1, got {iterations}")
    device_inputs = prepared.inputs_to_device(bench.make_inputs(seed))
    result = None
    for _ in range(iterations):
        result = prepared.step(device_inputs)
        prepared.sync_iteration()
    prepared.sync_run(result)
    return prepared.result_to_host(result)


class Fp64PreparedModel(TorchPreparedModel):
    """Eager in float64 without autocast: the verifier's reference."""

    def __init__(self, bench: BenchmarkModel, experiment: ExperimentConfig) -> None:
        device = torch.device(reference_experiment(experiment).accelerator)
        super().__init__(bench, dataclasses.replace(experiment, precision="fp32"), device)
        self.dtype = torch.float64
        self.autocast_dtype = None
        self.module.to(torch.float64)  # keeps the Parameter objects the optimizer holds

    def inputs_to_device(self, inputs: ModelInputs) -> ModelInputs:
        return ModelInputs(
            args=cast_floating(inputs.args, self.device, torch.float64),
            kwargs=cast_floating(inputs.kwargs, self.device, torch.float64),
            targets=cast_floating(inputs.targets, self.device, torch.float64),
        )


def make_run(
    load: Callable[[], BenchmarkModel],
    prepare: Callable[[BenchmarkModel], PreparedModel],
    seed: int,
    iterations: int = 1,
) -> Callable[[], Any]:
    """A callable for `verify`: fresh model from `seed`, prepared, run, result on the CPU."""

    def run() -> Any:
        torch.manual_seed(seed)
        bench = load()
        return run_steps(prepare(bench), bench, seed, iterations)

    return run


def fp64_unsupported_reason(experiment: ExperimentConfig) -> Optional[str]:
    """Why no fp64 reference can run for this experiment, or None."""
    device = reference_experiment(experiment).accelerator
    if device == "mps":
        return "MPS has no float64"
    return None
