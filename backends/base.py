"""What every execution stack declares (`Stack`) and what its runtime does (`PreparedModel`).

A stack module (backends/stacks/<name>.py) is parent-safe: its name, label, validity rules,
child environment and capabilities never import torch or a runtime. The child calls
`prepare`, which imports the stack's runtime (backends/runtimes/) and returns a
`PreparedModel` that the timing loop drives.
"""

from __future__ import annotations

import contextlib
import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Collection, ContextManager, Mapping, Optional

from core.config import DEFAULT_MODE, ExperimentConfig, RunSettings
from core.host.machine import HostCapabilities

if TYPE_CHECKING:
    from models.base import BenchmarkModel, ModelInputs

# Features a stack offers to observers (observers declares which one each needs).
DYNAMO_GRAPHS = "dynamo_graphs"  # dynamo compiles the model: counters, graph breaks
TORCH_PROFILER = "torch_profiler"  # the PyTorch profiler sees the work
TORCH_XLA_METRICS = "torch_xla_metrics"  # torch_xla's metrics report
XLA_HLO_DUMP = "xla_hlo_dump"  # XLA honours XLA_FLAGS=--xla_dump_to
TORCH_XLA_IR_FILES = "torch_xla_ir_files"  # torch_xla writes IR through XLA_SAVE_TENSORS_*
LOWERED_IR = "lowered_ir"  # the runtime lowers a step itself (PreparedModel.graph_ir)
XLA_PROFILER = "xla_profiler"  # XLA's profiler writes an XPlane trace (PreparedModel.xla_trace)


#: What the fork server of dynamo's children imports: besides the compiler, what each of its
#: children imports after it (each paid it, inside its phases): the C++ build's helpers,
#: which inductor imports before its first CPU kernel (0.3 to 1.1 CPU-s a child), and
#: SciPy's statistics, for the p-value of the paired speedup (0.8 to 1.3 CPU-s).
TORCH_COMPILER_PRELOAD = ("torch", "torch._dynamo", "torch._inductor.compile_fx",
                          "torch.utils.cpp_extension", "scipy.stats")
#: What a fork server of plain PyTorch children imports: torch and dynamo's modules, which
#: every child loads before it counts its workload (child/worker.py), not inductor's
#: compiler (2 CPU-s less than the compiler's).
TORCH_PRELOAD = ("torch", "torch._dynamo")


@dataclass(frozen=True)
class Capabilities:
    """What a stack offers beyond running a model."""

    #: Observer features (the constants above).
    features: frozenset[str] = frozenset()
    #: IR formats the stack can save (--save-ir-format).
    ir_formats: tuple[str, ...] = ()
    #: How a timed run ends, in words (docs and --list-stacks).
    synchronization: str = ""
    #: Whether the stack can share a process with eager PyTorch.
    shares_process_with_eager: bool = True
    #: Whether the stack runs the module on the experiment's own torch device (CUDA), so
    #: that the child may build the model there: its random weights are drawn on the device,
    #: which every timing process repeats, in seconds where the CPU takes minutes on models
    #: of billions of parameters (child/worker.py: build_device).
    builds_on_device: bool = False


class Stack(ABC):
    """One execution stack, selected once at planning and looked up by name in the child."""

    #: The registry name, recorded in every line as experiment.stack.
    name: str = ""
    capabilities: Capabilities = Capabilities()
    #: Among stacks that all handle a combination, the highest priority owns it.
    priority: int = 0
    #: A stack for the project's own tests (the verifier's debug stack): not listed to users.
    test_only: bool = False
    #: What a fork server for this stack's children imports once (runner/run/process/forkserver_server.py):
    #: libraries only, never anything that makes a device context or compiler state.
    preload: tuple[str, ...] = TORCH_PRELOAD
    #: Larger preloads this stack's children may start from when the sweep starts a server of
    #: one anyway (one server instead of two), the first one the sweep has; empty: only its own.
    shared_preloads: tuple[tuple[str, ...], ...] = ()
    #: Whether its CUDA experiments may share a GPU with others of a sweep by default
    #: (--experiments-per-gpu=auto): its runtime takes no more of the card's memory than its
    #: work needs (JAX and PyTorch/XLA reserve most of it at start).
    shares_a_gpu: bool = False

    def preload_for(self, experiment: ExperimentConfig) -> tuple[str, ...]:
        """The preload one experiment of this stack asks of the sweep's servers."""
        return self.preload

    def preload_in(self, sweep_preloads: Collection[tuple[str, ...]]) -> tuple[str, ...]:
        """The preload this stack's children start from in a sweep whose experiments ask for
        `sweep_preloads`: the first of its shared ones the sweep has, else its own."""
        for shared in self.shared_preloads:
            if shared in sweep_preloads:
                return shared
        return self.preload

    @abstractmethod
    def handles(self, experiment: ExperimentConfig) -> bool:
        """Whether this stack runs the combination (it may still reject it)."""

    @abstractmethod
    def label(self, experiment: ExperimentConfig) -> str:
        """Short human label, e.g. 'inductor', 'PJRT+openxla' or 'torchax:extract_jax'."""

    @abstractmethod
    def invalid_reason(
        self, experiment: ExperimentConfig, host: HostCapabilities
    ) -> Optional[str]:
        """Why the combination cannot run here, in a user's words, or None."""

    def modes(self, experiment: ExperimentConfig) -> tuple[str, ...]:
        """The compiler modes this stack offers for the experiment (none by default)."""
        return ()

    def planned(self, experiment: ExperimentConfig, environ: Mapping[str, str]) -> ExperimentConfig:
        """The experiment as this stack will run it: its name set, its mode None where it
        has no modes (the default mode means none), and any options it takes from the
        parent's environment (only debug stacks do) recorded in it."""
        mode = experiment.mode
        if not self.modes(experiment) and mode in (None, DEFAULT_MODE):
            mode = None
        return dataclasses.replace(experiment, stack=self.name, mode=mode)

    def mode_reason(self, experiment: ExperimentConfig) -> Optional[str]:
        """Why the experiment's mode does not apply to this stack, or None."""
        modes = self.modes(experiment)
        if experiment.mode is None or experiment.mode in modes:
            return None
        if not modes:
            return f"mode={experiment.mode} applies only to dynamo=inductor"
        return f"mode={experiment.mode} is not one of {', '.join(modes)}"

    def child_environment(self, experiment: ExperimentConfig) -> dict[str, str]:
        """Environment variables the child needs before anything is imported."""
        return {}

    def reference_experiment(self, experiment: ExperimentConfig) -> ExperimentConfig:
        """The eager experiment verification compares against: same test, precision and
        batch, on the experiment's device (the CPU for a TPU, which eager cannot drive)."""
        accelerator = "cpu" if experiment.accelerator == "tpu" else experiment.accelerator
        return dataclasses.replace(
            experiment, accelerator=accelerator, xla=None, dynamo=None, torch_xla2=None, xla_flags=None,
            enable_functionalization=False, stack_options=(), stack="eager",
        )

    def compiles_off_the_card(self, experiment: ExperimentConfig,
                              prepared: "PreparedModel") -> bool:
        """Whether compiling the prepared model runs nothing on its device, so that a GPU's
        gate may be lent meanwhile (child/device_gate.py); no unless a stack says so."""
        return False

    def initialize_process(self, experiment: ExperimentConfig) -> None:
        """Start the stack's runtime in the child before any model runs (child only).

        The verification child calls it before the eager references: PyTorch's autograd
        engine sizes its device queues at the first backward, so a device registered later
        (the XLA device) would fail there.
        """

    @abstractmethod
    def prepare(
        self, bench: "BenchmarkModel", experiment: ExperimentConfig, settings: RunSettings
    ) -> "PreparedModel":
        """Place the model on the stack (child only)."""


class DeviceTimer(ABC):
    """Times work on the device between events (--pure-wall-time), not by the host clock."""

    @abstractmethod
    def begin(self) -> None:
        """Record the start of a span of device work."""

    @abstractmethod
    def end(self) -> None:
        """Record the end of the span begun last."""

    @abstractmethod
    def seconds(self) -> float:
        """Device seconds of every span recorded since the last call (after a sync)."""

    def span_seconds(self) -> Optional[list[float]]:
        """Device seconds of each span recorded since the last call (after a sync), which
        they end as `seconds()` does; None from a timer that only knows their sum."""
        return None


class PreparedModel(ABC):
    """A model placed on its stack, ready for the timing loop (child side)."""

    #: True when each iteration must end with a synchronization (lazy tensor stacks).
    sync_every_iteration: bool = False
    #: The inductor options its torch.compile applies over inductor's global settings (for
    #: the settings record, child/settings.py); none where nothing is compiled so.
    inductor_options: Mapping[str, Any] = MappingProxyType({})

    @abstractmethod
    def inputs_to_device(self, inputs: "ModelInputs") -> Any:
        """Move one set of inputs to the stack's device, in the stack's precision."""

    @abstractmethod
    def step(self, device_inputs: Any) -> Any:
        """One iteration: forward in eval; forward, loss and backward in train."""

    def forward_context(self) -> ContextManager[Any]:
        """A context with the grad mode and autocast the model's forward runs under in
        `step`, entered by the settings record only (child/settings.py)."""
        return contextlib.nullcontext()

    def sync_iteration(self) -> None:
        """End an iteration (lazy stacks cut and execute the graph here)."""

    @abstractmethod
    def sync_run(self, last_result: Any) -> None:
        """Wait until everything queued by a timed run has finished on the device."""

    def start_background_work(self) -> None:
        """Called once before the warm-up where the calling thread is about to be pinned to
        one core: start the background work the first call will need (a compiler's worker
        processes), so that it inherits the child's cores and not that one."""

    def settle(self) -> None:
        """Called once after the warm-up, before the first timed run: stop background work
        that the warm-up left behind (a compiler's worker processes), so that it does not
        share the cores of the timed runs."""

    def begin_timed_run(self) -> None:
        """Reset per-run counters before a timed run."""

    def end_timed_run(self) -> dict[str, float]:
        """Metrics of the timed run that just ended (one value each)."""
        return {}

    def final_metrics(self) -> dict[str, Any]:
        """Metrics of the whole experiment (compile counts...)."""
        return {}

    def reset_peak_device_memory(self) -> None:
        """Start counting the device's peak memory afresh (stacks that can tell it)."""

    def peak_device_memory_bytes(self) -> Optional[int]:
        """Peak device memory since the last reset, or None where the stack cannot tell."""
        return None

    def result_to_host(self, result: Any) -> Any:
        """The result of `step` as CPU tensors, for the verifier."""
        return result

    def accelerator_model(self) -> str:
        """Name of the device the experiment runs on."""
        return ""

    # Hooks for observers; a stack offers them through its capabilities' features.

    def xla_metrics_report(self) -> Optional[str]:
        """torch_xla's metrics report as text (feature TORCH_XLA_METRICS)."""
        return None

    def fallback_operators(self) -> Optional[set[str]]:
        """Operators that fell back to the CPU instead of being lowered (XLA stacks).

        None means the stack has no such notion, and the profiler reports aten operators.
        """
        return None

    def graph_ir(self, ir_format: str, device_inputs: Any) -> Optional[str]:
        """The IR of one step on `device_inputs` in `ir_format` (feature LOWERED_IR)."""
        return None

    def xla_trace(self, log_dir: str) -> ContextManager[Any]:
        """A context that captures XLA's profiler trace (XPlane, for TensorBoard) into
        `log_dir` (feature XLA_PROFILER)."""
        return contextlib.nullcontext()

    def device_timer(self) -> Optional[DeviceTimer]:
        """A timer of device work between events (CUDA), or None where work is not timed
        that way; --pure-wall-time uses it."""
        return None
