"""torchax (formerly torch_xla2): torch modules run as JAX functions on JAX's PJRT runtime."""

from __future__ import annotations

from typing import Optional

from backends.availability import torchax_environment, torchax_reason
from backends.base import LOWERED_IR, XLA_HLO_DUMP, XLA_PROFILER, Capabilities, PreparedModel, Stack
from core.config import ExperimentConfig, RunSettings
from core.host.machine import HostCapabilities

TORCHAX_MODES = ("extract_jax", "torch_export")
TORCHAX_OPTIMIZERS = (None, "sgd", "adam", "harness")


class TorchaxStack(Stack):
    """torch_xla2=extract_jax or torch_export: one jitted JAX function per experiment."""

    name = "torchax"
    #: torchax itself is left to the child: importing it changes torch for the process.
    preload = ("torch", "torch._dynamo", "jax")  # dynamo: as every child (child/worker.py)
    capabilities = Capabilities(
        features=frozenset({XLA_HLO_DUMP, LOWERED_IR, XLA_PROFILER}),
        ir_formats=("hlo", "stablehlo"),
        synchronization="jax.block_until_ready on the last result of each run",
        # Importing torchax breaks torch.compile and eager autograd in that process.
        shares_process_with_eager=False,
    )

    def handles(self, experiment: ExperimentConfig) -> bool:
        return experiment.torch_xla2 is not None

    def label(self, experiment: ExperimentConfig) -> str:
        return f"torchax:{experiment.torch_xla2}"

    def invalid_reason(self, experiment: ExperimentConfig, host: HostCapabilities) -> Optional[str]:
        mode = experiment.torch_xla2
        if mode not in TORCHAX_MODES:
            return f"torch_xla2={mode} is unknown; expected one of {', '.join(TORCHAX_MODES)}"
        if experiment.xla is not None or experiment.dynamo is not None:
            return (f"torch_xla2 runs without xla and dynamo "
                    f"(got xla={experiment.xla}, dynamo={experiment.dynamo})")
        if experiment.optimizer not in TORCHAX_OPTIMIZERS:
            return f"torch_xla2={mode} has no optimizer {experiment.optimizer!r}"
        if mode == "torch_export" and experiment.precision == "amp":
            return ("torch_xla2=torch_export runs the exported ATen graph as it is and cannot "
                    "autocast; use --precision=bf16 or torch_xla2=extract_jax")
        return torchax_reason(experiment, host)

    def child_environment(self, experiment: ExperimentConfig) -> dict[str, str]:
        return torchax_environment(experiment)

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        from backends.runtimes.torchax import TorchaxPreparedModel

        return TorchaxPreparedModel(bench, experiment)


STACK = TorchaxStack()
