"""PyTorch/XLA lazy tensor: trace each iteration, cut and run it with torch_xla.sync()."""

from __future__ import annotations

from typing import Optional

from backends.availability import torch_xla_environment, torch_xla_reason
from backends.base import (TORCH_PROFILER, TORCH_XLA_IR_FILES, TORCH_XLA_METRICS, XLA_HLO_DUMP,
                           XLA_PROFILER, Capabilities, PreparedModel, Stack)
from core.config import ExperimentConfig, RunSettings
from core.host.machine import HostCapabilities

#: What the PyTorch/XLA stacks (lazy tensor and openxla) offer.
TORCH_XLA_CAPABILITIES = dict(
    features=frozenset({TORCH_PROFILER, TORCH_XLA_METRICS, XLA_HLO_DUMP, TORCH_XLA_IR_FILES,
                        XLA_PROFILER}),
    ir_formats=("text", "hlo", "stablehlo"),
    shares_process_with_eager=False,
)


class TorchXlaStack(Stack):
    """What the PyTorch/XLA stacks share: rules, environment, device start-up, reference."""

    #: With the stacks' own runtime module, which every child imports (5 to 23 ms a child on a
    #: loaded 2-core machine); it starts nothing at import.
    preload = ("torch", "torch_xla", "backends.runtimes.torch_xla")

    def invalid_reason(self, experiment: ExperimentConfig, host: HostCapabilities) -> Optional[str]:
        return torch_xla_reason(experiment, host)

    def child_environment(self, experiment: ExperimentConfig) -> dict[str, str]:
        return torch_xla_environment(experiment)

    def initialize_process(self, experiment: ExperimentConfig) -> None:
        from backends.runtimes.torch_xla import start_xla_device

        start_xla_device()


class XlaLazyStack(TorchXlaStack):
    """xla=PJRT without dynamo: the module runs as lazy tensors on the XLA device."""

    name = "xla_lazy"
    capabilities = Capabilities(
        synchronization="torch_xla.sync() after each iteration, xm.wait_device_ops() after each run",
        **TORCH_XLA_CAPABILITIES,
    )

    def handles(self, experiment: ExperimentConfig) -> bool:
        return experiment.xla == "PJRT" and experiment.torch_xla2 is None and experiment.dynamo is None

    def label(self, experiment: ExperimentConfig) -> str:
        return str(experiment.xla)

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        from backends.runtimes.torch_xla import XlaPreparedModel

        return XlaPreparedModel(bench, experiment, sync_every_iteration=True)


STACK = XlaLazyStack()
