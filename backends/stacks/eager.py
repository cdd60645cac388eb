"""Plain PyTorch eager on CPU or CUDA: no XLA, no dynamo, no torchax."""

from __future__ import annotations

from typing import Optional

from backends.availability import native_accelerator_reason
from backends.base import (TORCH_COMPILER_PRELOAD, TORCH_PRELOAD, TORCH_PROFILER,
                           Capabilities, PreparedModel, Stack)
from core.config import ExperimentConfig, RunSettings
from core.host.machine import HostCapabilities


class EagerStack(Stack):
    name = "eager"
    shares_a_gpu = True
    # Beside dynamo experiments, eager children start from dynamo's server, so that the sweep
    # starts one server instead of two (eager + aot_eager on the builtin mlp, eval and train:
    # 16.6 s and CPU-s per sweep with two servers, 12.3 with one).
    preload = TORCH_PRELOAD
    shared_preloads = (TORCH_COMPILER_PRELOAD,)
    capabilities = Capabilities(
        features=frozenset({TORCH_PROFILER}),
        synchronization="torch.cuda.synchronize() at the end of each run (CUDA); CPU work is synchronous",
        builds_on_device=True,
    )

    def handles(self, experiment: ExperimentConfig) -> bool:
        return experiment.xla is None and experiment.torch_xla2 is None and experiment.dynamo is None

    def label(self, experiment: ExperimentConfig) -> str:
        return "eager"

    def invalid_reason(self, experiment: ExperimentConfig, host: HostCapabilities) -> Optional[str]:
        return native_accelerator_reason(experiment, host, "eager")

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        import torch

        from backends.runtimes.torch_device import TorchPreparedModel

        return TorchPreparedModel(bench, experiment, torch.device(experiment.accelerator))


STACK = EagerStack()
