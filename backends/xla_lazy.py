"""PyTorch/XLA lazy tensor: trace each iteration, cut and run it with torch_xla.sync()."""

from __future__ import annotations

from typing import Optional

from backends.base import HostCapabilities, PreparedModel
from backends.xla_common import TorchXlaBackend, torch_xla_reason
from runner.config import ExperimentConfig, RunSettings


class XlaLazyBackend(TorchXlaBackend):
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

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        from backends.xla_runtime import XlaPreparedModel

        return XlaPreparedModel(bench, experiment, sync_every_iteration=True)
