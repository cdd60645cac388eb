"""torch.compile(backend="openxla") on the PyTorch/XLA device."""

from __future__ import annotations

from typing import Optional

from backends.availability import torch_xla_reason, unregistered_dynamo_reason
from backends.base import DYNAMO_GRAPHS, Capabilities, PreparedModel
from backends.stacks.xla_lazy import TORCH_XLA_CAPABILITIES, TorchXlaStack
from core.config import ExperimentConfig, RunSettings
from core.host.machine import HostCapabilities

OPENXLA_BACKENDS = ("openxla", "openxla_eval")


class OpenXlaStack(TorchXlaStack):
    """xla=PJRT with dynamo: dynamo graphs compiled by XLA, run on the XLA device."""

    name = "openxla"
    capabilities = Capabilities(
        synchronization="xm.wait_device_ops() after each run (torch_xla.sync() after each "
                        "iteration when an optimizer step runs outside the graphs)",
        **{**TORCH_XLA_CAPABILITIES,
           "features": TORCH_XLA_CAPABILITIES["features"] | {DYNAMO_GRAPHS}},
    )

    def handles(self, experiment: ExperimentConfig) -> bool:
        return experiment.xla == "PJRT" and experiment.torch_xla2 is None and experiment.dynamo is not None

    def label(self, experiment: ExperimentConfig) -> str:
        return f"{experiment.xla}+{experiment.dynamo}"

    def invalid_reason(self, experiment: ExperimentConfig, host: HostCapabilities) -> Optional[str]:
        dynamo = experiment.dynamo
        if dynamo not in OPENXLA_BACKENDS:
            return (f"dynamo={dynamo} does not compile for the XLA device; "
                    "with xla=PJRT use dynamo=openxla")
        if dynamo == "openxla_eval" and experiment.test == "train":
            return "dynamo=openxla_eval compiles inference only; train with dynamo=openxla"
        return torch_xla_reason(experiment, host) or unregistered_dynamo_reason(dynamo, host)

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        import torch

        from backends.runtimes.torch_xla import XlaPreparedModel

        def compile_module(module):
            return torch.compile(module, backend=experiment.dynamo, fullgraph=experiment.fullgraph)

        # An optimizer step runs outside the compiled graphs, as lazy tensors: cut it
        # every iteration so that runs do not grow one graph across iterations.
        lazy_work = experiment.optimizer_in_effect() is not None
        return XlaPreparedModel(bench, experiment, wrap=compile_module, sync_every_iteration=lazy_work)


STACK = OpenXlaStack()
