"""torch.compile with any dynamo backend that runs without XLA (inductor, aot_eager, ...)."""

from __future__ import annotations

from typing import Optional

from backends.base import Backend, HostCapabilities, PreparedModel
from backends.eager import native_accelerator_reason
from runner.config import ExperimentConfig, RunSettings

XLA_ONLY_DYNAMO_BACKENDS = ("openxla", "openxla_eval")


def unregistered_dynamo_reason(dynamo: str, host: HostCapabilities) -> Optional[str]:
    """Why a dynamo backend name cannot be used here (the probe did not find it), or None."""
    if host.dynamo_backends and dynamo not in host.dynamo_backends:
        return (
            f"dynamo backend {dynamo!r} is not registered in torch {host.torch_version}; "
            f"known backends: {', '.join(sorted(host.dynamo_backends))}"
        )
    return None


class DynamoBackend(Backend):
    """torch.compile(backend=dynamo) on a CPU or CUDA device."""

    name = "dynamo"

    def handles(self, experiment: ExperimentConfig) -> bool:
        return (
            experiment.xla is None
            and experiment.torch_xla2 is None
            and experiment.dynamo is not None
        )

    def invalid_reason(
        self, experiment: ExperimentConfig, host: HostCapabilities
    ) -> Optional[str]:
        dynamo = experiment.dynamo
        if dynamo in XLA_ONLY_DYNAMO_BACKENDS:
            return f"dynamo={dynamo} compiles for the XLA device and needs xla=PJRT"
        reason = native_accelerator_reason(experiment, host, f"dynamo={dynamo}")
        if reason:
            return reason
        return unregistered_dynamo_reason(dynamo, host)

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        import torch

        from backends.torch_native import TorchPreparedModel

        def compile_module(module):
            return torch.compile(module, backend=experiment.dynamo)

        return TorchPreparedModel(
            bench, experiment, torch.device(experiment.accelerator), wrap=compile_module
        )
