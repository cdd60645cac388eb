"""torch.compile with any dynamo backend that runs without XLA (inductor, aot_eager, ...).

Inductor has modes, as the compiler dashboard tracks them: `default`, `cudagraphs`
(default plus CUDA graphs, CUDA only), `dynamic` (dynamic shapes) and `max-autotune`
(autotuned kernels, without CUDA graphs, so that it stays apart from `cudagraphs`).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from backends.availability import native_accelerator_reason, unregistered_dynamo_reason
from backends.base import (DYNAMO_GRAPHS, TORCH_COMPILER_PRELOAD, TORCH_PROFILER, Capabilities,
                           PreparedModel, Stack)
from core.config import DEFAULT_MODE, ExperimentConfig, RunSettings
from core.fields import INDUCTOR_MODES
from core.host.machine import HostCapabilities

XLA_ONLY_DYNAMO_BACKENDS = ("openxla", "openxla_eval")
#: The dynamo backends whose compiles run on the host alone (inductor's max-autotune and
#: freezing aside: `compiles_on_device`); others may tune on the card as they compile.
HOST_COMPILED_BACKENDS = frozenset({"inductor", "aot_eager", "aot_eager_decomp_partition",
                                    "eager"})


def model_inductor_settings(experiment: ExperimentConfig,
                            model_settings: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """The model's own inductor settings (BenchmarkModel.inductor_settings) where inductor
    compiles the experiment; none elsewhere."""
    return dict(model_settings or {}) if experiment.dynamo == "inductor" else {}


def compile_arguments(experiment: ExperimentConfig,
                      model_settings: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """torch.compile's keyword arguments for the experiment's backend, mode and switches;
    the model's inductor settings join inductor's options."""
    arguments: dict[str, Any] = {"backend": experiment.dynamo}
    if experiment.fullgraph:
        arguments["fullgraph"] = True
    options = model_inductor_settings(experiment, model_settings)
    if experiment.freezing:
        options["freezing"] = True
    if experiment.mode == "cudagraphs":
        options["triton.cudagraphs"] = True
    elif experiment.mode == "dynamic":
        arguments["dynamic"] = True
    elif experiment.mode == "max-autotune":
        arguments["mode"] = "max-autotune-no-cudagraphs"
    if options and "mode" in arguments:
        # torch.compile takes a mode or options, not both: the mode's options join ours.
        from torch._inductor import list_mode_options

        options = {**list_mode_options(arguments.pop("mode")), **options}
    if options:
        arguments["options"] = options
    return arguments


def inductor_options(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The inductor settings torch.compile applies with these arguments: its options, or its
    mode's."""
    if arguments.get("backend") != "inductor":
        return {}
    if "options" in arguments:
        return dict(arguments["options"])
    if "mode" in arguments:
        from torch._inductor import list_mode_options

        return dict(list_mode_options(arguments["mode"]))
    return {}


def compiles_on_device(options: Optional[Mapping[str, Any]]) -> bool:
    """Whether inductor runs work on the card while it compiles, with these options (a
    mode's included: `inductor_options`): max-autotune times candidate kernels, freezing
    folds constants through the graph."""
    import torch._inductor.config as inductor_config

    options = options or {}
    tuned = any(bool(options.get(name, getattr(inductor_config, name, False)))
                for name in ("max_autotune", "max_autotune_gemm", "max_autotune_pointwise"))
    return tuned or bool(options.get("freezing", inductor_config.freezing))


class DynamoStack(Stack):
    """torch.compile(backend=dynamo) on a CPU or CUDA device."""

    name = "dynamo"
    shares_a_gpu = True
    #: The compiler's modules (seconds to import) with nothing compiled: every child still
    #: starts from empty dynamo counters and caches, and compiles into its own cache folder.
    preload = TORCH_COMPILER_PRELOAD
    capabilities = Capabilities(
        features=frozenset({DYNAMO_GRAPHS, TORCH_PROFILER}),
        synchronization="torch.cuda.synchronize() at the end of each run (CUDA); CPU work is synchronous",
        builds_on_device=True,
    )

    def handles(self, experiment: ExperimentConfig) -> bool:
        return (experiment.xla is None and experiment.torch_xla2 is None
                and experiment.dynamo is not None)

    def modes(self, experiment: ExperimentConfig) -> tuple[str, ...]:
        return INDUCTOR_MODES if experiment.dynamo == "inductor" else ()

    def label(self, experiment: ExperimentConfig) -> str:
        if experiment.mode in (None, DEFAULT_MODE):
            return str(experiment.dynamo)
        return f"{experiment.dynamo}:{experiment.mode}"

    def invalid_reason(self, experiment: ExperimentConfig, host: HostCapabilities) -> Optional[str]:
        dynamo = experiment.dynamo
        if dynamo in XLA_ONLY_DYNAMO_BACKENDS:
            return f"dynamo={dynamo} compiles for the XLA device and needs xla=PJRT"
        if experiment.mode == "cudagraphs" and experiment.accelerator != "cuda":
            return f"mode=cudagraphs needs CUDA; {experiment.accelerator} has no CUDA graphs"
        return (native_accelerator_reason(experiment, host, f"dynamo={dynamo}")
                or unregistered_dynamo_reason(dynamo, host))

    def compiles_off_the_card(self, experiment: ExperimentConfig, prepared: PreparedModel) -> bool:
        return (experiment.dynamo in HOST_COMPILED_BACKENDS
                and not compiles_on_device(prepared.inductor_options))

    def prepare(self, bench, experiment: ExperimentConfig, settings: RunSettings) -> PreparedModel:
        import torch

        from backends.runtimes.torch_device import TorchPreparedModel

        arguments = compile_arguments(experiment, bench.inductor_settings)

        def compile_function(function):
            compiled = torch.compile(function, **arguments)
            if experiment.mode != "cudagraphs":
                return compiled

            def replay(*args, **kwargs):
                # Each iteration is a new step for CUDA graph trees: the last one's outputs
                # may be overwritten (as PyTorch's harness marks its iterations).
                torch.compiler.cudagraph_mark_step_begin()
                return compiled(*args, **kwargs)

            return replay

        # The whole iteration is compiled, as PyTorch's harness compiles its model_iter_fn:
        # inference the forward under autocast, training forward, loss, backward and the
        # optimizer's step.
        prepared = TorchPreparedModel(
            bench, experiment, torch.device(experiment.accelerator),
            compile_iteration=compile_function,
        )
        prepared.inductor_options = inductor_options(arguments)
        return prepared


STACK = DynamoStack()
