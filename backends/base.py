"""The contract every execution stack implements.

The parent uses only `handles`, `invalid_reason` and `child_environment`, which must not
import torch or any runtime. The child calls `prepare`, which imports what the stack needs
and returns a `PreparedModel` that the timing loop drives.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from runner.config import ExperimentConfig, RunSettings

if TYPE_CHECKING:
    from models.base import BenchmarkModel, ModelInputs


@dataclass(frozen=True)
class HostCapabilities:
    """What the probe child found on this machine (see runner/probe.py)."""

    python: str = ""
    torch_version: Optional[str] = None
    cuda_available: bool = False
    cuda_device_names: tuple[str, ...] = ()
    dynamo_backends: tuple[str, ...] = ()
    packages: dict[str, str] = field(default_factory=dict)
    torch_error: Optional[str] = None

    def version_of(self, package: str) -> Optional[str]:
        return self.packages.get(package)

    def has_tpu(self) -> bool:
        return "libtpu" in self.packages or "libtpu-nightly" in self.packages

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "HostCapabilities":
        return cls(
            python=data.get("python", ""),
            torch_version=data.get("torch_version"),
            cuda_available=bool(data.get("cuda_available")),
            cuda_device_names=tuple(data.get("cuda_device_names", ())),
            dynamo_backends=tuple(data.get("dynamo_backends", ())),
            packages=dict(data.get("packages", {})),
            torch_error=data.get("torch_error"),
        )


class PreparedModel(ABC):
    """A model placed on its stack, ready for the timing loop (child side)."""

    #: True when each iteration must end with a synchronization (lazy tensor stacks).
    sync_every_iteration: bool = False

    @abstractmethod
    def inputs_to_device(self, inputs: "ModelInputs") -> Any:
        """Move one set of inputs to the stack's device, in the stack's precision."""

    @abstractmethod
    def step(self, device_inputs: Any) -> Any:
        """One iteration: forward in eval; forward, loss and backward in train."""

    def sync_iteration(self) -> None:
        """End an iteration (lazy stacks cut and execute the graph here)."""

    @abstractmethod
    def sync_run(self, last_result: Any) -> None:
        """Wait until everything queued by a timed run has finished on the device."""

    def begin_timed_run(self) -> None:
        """Reset per-run counters before a timed run."""

    def end_timed_run(self) -> dict[str, float]:
        """Metrics of the timed run that just ended (one value each)."""
        return {}

    def final_metrics(self) -> dict[str, Any]:
        """Metrics of the whole experiment (peak device memory, compile counts...)."""
        return {}

    def result_to_host(self, result: Any) -> Any:
        """The result of `step` as CPU tensors, for the verifier."""
        return result

    def accelerator_model(self) -> str:
        """Name of the device the experiment runs on."""
        return ""

    # Observability hooks (runner/observers). The defaults suit stacks without XLA.

    def xla_metrics_report(self) -> Optional[str]:
        """torch_xla's metrics report as text; None where the stack has none."""
        return None

    def fallback_operators(self) -> Optional[set[str]]:
        """Operators that fell back to the CPU instead of being lowered (XLA stacks).

        None means the stack has no such notion, and the profiler reports aten operators.
        """
        return None

    def graph_ir(self, ir_format: str, device_inputs: Any) -> Optional[str]:
        """The IR of one step on `device_inputs` in `ir_format` ('text', 'hlo' or
        'stablehlo'), for stacks that lower the step themselves (torchax); None otherwise.

        Stacks on torch_xla save their IR through torch_xla's own environment variables.
        """
        return None


class Backend(ABC):
    """One execution stack: validity rules in the parent, preparation in the child."""

    name: str = ""

    @abstractmethod
    def handles(self, experiment: ExperimentConfig) -> bool:
        """Whether this backend owns the combination (it may still reject it)."""

    @abstractmethod
    def invalid_reason(
        self, experiment: ExperimentConfig, host: HostCapabilities
    ) -> Optional[str]:
        """Why the combination cannot run here, in a user's words, or None."""

    def child_environment(
        self, experiment: ExperimentConfig, settings: RunSettings
    ) -> dict[str, str]:
        """Environment variables the child needs before anything is imported."""
        return {}

    def initialize_process(self, experiment: ExperimentConfig) -> None:
        """Start the stack's runtime in the child before any model runs (child only).

        The verification child calls it before the eager references: PyTorch's autograd
        engine sizes its device queues at the first backward, so a device registered later
        (the XLA device) would fail there.
        """

    @abstractmethod
    def prepare(
        self, bench: "BenchmarkModel", experiment: ExperimentConfig, settings: RunSettings
    ) -> PreparedModel:
        """Place the model on the stack (child only)."""
