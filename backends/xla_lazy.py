"""PyTorch/XLA lazy tensor: trace each iteration, cut and run it with torch_xla.sync()."""

from __future__ import annotations

from typing import Optional

from backends.base import Backend, HostCapabilities, PreparedModel
from backends.xla_common import torch_xla_environment, torch_xla_reason
from runner.config import ExperimentConfig, RunSettings


class XlaLazyBackend(Backend):
    """xla=PJRT without dynamo: the module runs as lazy tensors on the XLA device."""

    name = "xla_lazy"

    def handles(self, experiment: ExperimentConfig) -> bool:
        return (
            experiment.xla == "PJRT"
            and experiment.torch_xla2 is None
            and experiment.dynamo is None
        )

    def invalid_reason(
        self, experiment: ExperimentConfig, host: HostCapabilities
    ) -> Optional[str]:
        return torch_xla_reason(experiment, host)

    def child_environment(
        self, experiment: ExperimentConfig, settings: RunSettings
    ) -> dict[str, str]:
        return torch_xla_environment(experiment)

    def initialize_process(self, experiment: ExperimentConfig) -> None:
        from backends.xla_runtime import start_xla_device

        start_xla_device()

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        from backends.xla_runtime import XlaPreparedModel

        return XlaPreparedModel(bench, experiment, sync_every_iteration=True)
