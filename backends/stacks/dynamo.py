"""torch.compile with any dynamo backend that runs without XLA (inductor, aot_eager, ...)."""

from __future__ import annotations

from typing import Optional

from backends.availability import native_accelerator_reason, unregistered_dynamo_reason
from backends.base import DYNAMO_GRAPHS, TORCH_PROFILER, Capabilities, PreparedModel, Stack
from core.config import ExperimentConfig, RunSettings
from core.host import HostCapabilities

XLA_ONLY_DYNAMO_BACKENDS = ("openxla", "openxla_eval")


class DynamoStack(Stack):
    """torch.compile(backend=dynamo) on a CPU or CUDA device."""

    name = "dynamo"
    capabilities = Capabilities(
        features=frozenset({DYNAMO_GRAPHS, TORCH_PROFILER}),
        synchronization="torch.cuda.synchronize() at the end of each run (CUDA); CPU work is synchronous",
    )

    def handles(self, experiment: ExperimentConfig) -> bool:
        return (experiment.xla is None and experiment.torch_xla2 is None
                and experiment.dynamo is not None)

    def label(self, experiment: ExperimentConfig) -> str:
        return str(experiment.dynamo)

    def invalid_reason(self, experiment: ExperimentConfig, host: HostCapabilities) -> Optional[str]:
        dynamo = experiment.dynamo
        if dynamo in XLA_ONLY_DYNAMO_BACKENDS:
            return f"dynamo={dynamo} compiles for the XLA device and needs xla=PJRT"
        return (native_accelerator_reason(experiment, host, f"dynamo={dynamo}")
                or unregistered_dynamo_reason(dynamo, host))

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        import torch

        from backends.runtimes.torch_device import TorchPreparedModel

        def compile_module(module):
            return torch.compile(module, backend=experiment.dynamo, fullgraph=experiment.fullgraph)

        return TorchPreparedModel(
            bench, experiment, torch.device(experiment.accelerator), wrap=compile_module
        )


STACK = DynamoStack()
