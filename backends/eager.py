"""Plain PyTorch eager execution on CPU or CUDA."""

from __future__ import annotations

from typing import Optional

from backends.base import Backend, HostCapabilities, PreparedModel
from runner.config import ExperimentConfig, RunSettings


def native_accelerator_reason(
    experiment: ExperimentConfig, host: HostCapabilities, stack: str
) -> Optional[str]:
    """Why a torch-native stack cannot run on the experiment's accelerator, or None."""
    if host.torch_version is None:
        return f"{stack} needs PyTorch, which cannot be imported here ({host.torch_error})"
    if experiment.accelerator == "tpu":
        return f"{stack} does not run on TPU; TPUs are driven only through an XLA stack"
    if experiment.accelerator == "cuda" and not host.cuda_available:
        return f"{stack} on cuda needs a CUDA device, and torch {host.torch_version} sees none"
    return None


class EagerBackend(Backend):
    """PyTorch eager: no XLA, no dynamo, no torchax."""

    name = "eager"

    def handles(self, experiment: ExperimentConfig) -> bool:
        return (
            experiment.xla is None
            and experiment.torch_xla2 is None
            and experiment.dynamo is None
        )

    def invalid_reason(
        self, experiment: ExperimentConfig, host: HostCapabilities
    ) -> Optional[str]:
        return native_accelerator_reason(experiment, host, "eager")

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        import torch

        from backends.torch_native import TorchPreparedModel

        return TorchPreparedModel(bench, experiment, torch.device(experiment.accelerator))
