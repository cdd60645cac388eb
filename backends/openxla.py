"""torch.compile(backend="openxla") on the PyTorch/XLA device."""

from __future__ import annotations

from typing import Optional

from backends.base import HostCapabilities, PreparedModel
from backends.dynamo import unregistered_dynamo_reason
from backends.xla_common import TorchXlaBackend, torch_xla_reason
from runner.config import ExperimentConfig, RunSettings

OPENXLA_BACKENDS = ("openxla", "openxla_eval")


class OpenXlaBackend(TorchXlaBackend):
    """xla=PJRT with dynamo: dynamo graphs compiled by XLA, run on the XLA device."""

    name = "openxla"

    def handles(self, experiment: ExperimentConfig) -> bool:
        return (
            experiment.xla == "PJRT"
            and experiment.torch_xla2 is None
            and experiment.dynamo is not None
        )

    def invalid_reason(
        self, experiment: ExperimentConfig, host: HostCapabilities
    ) -> Optional[str]:
        dynamo = experiment.dynamo
        if dynamo not in OPENXLA_BACKENDS:
            return (
                f"dynamo={dynamo} does not compile for the XLA device; "
                "with xla=PJRT use dynamo=openxla"
            )
        if dynamo == "openxla_eval" and experiment.test == "train":
            return "dynamo=openxla_eval compiles inference only; train with dynamo=openxla"
        return torch_xla_reason(experiment, host) or unregistered_dynamo_reason(dynamo, host)

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        import torch

        from backends.xla_runtime import XlaPreparedModel

        def compile_module(module):
            return torch.compile(module, backend=experiment.dynamo)

        # An optimizer step runs outside the compiled graphs, as lazy tensors: cut it
        # every iteration so that runs do not grow one graph across iterations.
        lazy_work = experiment.test == "train" and experiment.optimizer is not None
        return XlaPreparedModel(
            bench, experiment, wrap=compile_module, sync_every_iteration=lazy_work
        )
