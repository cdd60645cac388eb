"""The verifier's float64 reference: eager in fp64 without autocast (child side)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from backends.runtimes.precision import cast_floating
from backends.runtimes.torch_device import TorchPreparedModel
from core.config import ExperimentConfig
from models.base import BenchmarkModel, ModelInputs


class Fp64PreparedModel(TorchPreparedModel):
    """Eager in float64 on the reference's device, whatever the experiment's precision."""

    def __init__(self, bench: BenchmarkModel, reference: ExperimentConfig) -> None:
        device = torch.device(reference.accelerator)
        super().__init__(bench, dataclasses.replace(reference, precision="fp32"), device)
        self.dtype = torch.float64
        self.autocast_dtype = None
        self.module.to(torch.float64)  # keeps the Parameter objects the optimizer holds

    def inputs_to_device(self, inputs: ModelInputs) -> ModelInputs:
        return ModelInputs(
            args=cast_floating(inputs.args, self.device, torch.float64),
            kwargs=cast_floating(inputs.kwargs, self.device, torch.float64),
            targets=cast_floating(inputs.targets, self.device, torch.float64),
        )


def fp64_unsupported_reason(reference: ExperimentConfig) -> Optional[str]:
    """Why no fp64 reference can run on the reference's device, or None."""
    if reference.accelerator == "mps":
        return "MPS has no float64"
    return None
