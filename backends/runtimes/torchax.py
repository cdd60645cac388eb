"""torchax in the child: a torch module as a pure, jitted JAX function.

Two ways to get the function:
- extract_jax: torchax.extract_jax wraps `torch.func.functional_call` of the module under
  torchax's environment, so every torch op becomes a JAX op when JAX traces it.
- torch_export: `torch.export` captures an ATen graph first; torchax's interpreter runs that
  graph's nodes as JAX functions.

Eval jits `f(params, buffers, args, kwargs) -> outputs`. Train jits `jax.value_and_grad`
of the loss over the trainable parameters (plus an optional SGD or Adam update). Buffers are
inputs of the pure function: updates a module makes to them in train mode (BatchNorm running
statistics) are dropped, so every iteration sees the initial buffers.

Imported only by the child: it imports torch, JAX and torchax.
"""

from __future__ import annotations

import dataclasses

import importlib.util
import logging
import sys
import types
from typing import Any, Callable, Mapping, Optional

import torch
from torch.utils import _pytree as torch_pytree

from backends.base import PreparedModel
from backends.runtimes.torch_device import to_cpu
from core.host.machine import cpu_model_name
from models.base import BenchmarkModel, ModelInputs
from core.config import ExperimentConfig
from backends.runtimes.precision import amp_dtype, cast_floating, parameter_dtype

log = logging.getLogger(__name__)

#: The event JAX records once per backend (XLA) compilation, with its duration.
JAX_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
#: jax_default_matmul_precision for each matmul precision (JAX uses the same three names).
JAX_MATMUL_PRECISION = {"highest": "highest", "high": "high", "default": "default",
                        "medium": "default"}
LEARNING_RATE = 1e-3
ADAM_BETAS = (0.9, 0.999)
ADAM_EPSILON = 1e-8


def import_torchax() -> types.ModuleType:
    """Import torchax; where flax is absent, stand in for the one flax module it imports.

    torchax 0.0.13 imports `flax.training.checkpoints` at import time, only for its
    checkpoint helpers, which the runner never calls; flax is not among its requirements.
    """
    if "flax" not in sys.modules and importlib.util.find_spec("flax") is None:
        flax = types.ModuleType("flax")
        training = types.ModuleType("flax.training")
        checkpoints = types.ModuleType("flax.training.checkpoints")
        flax.training, training.checkpoints = training, checkpoints  # type: ignore[attr-defined]
        sys.modules.update(
            {"flax": flax, "flax.training": training, "flax.training.checkpoints": checkpoints}
        )
    import torchax
    import torchax.amp
    import torchax.decompositions
    import torchax.export
    import torchax.interop

    return torchax


class CompileCounter:
    """Counts JAX backend compilations (and their seconds) from jax.monitoring events."""

    def __init__(self) -> None:
        import jax.monitoring

        self.count = 0
        self.seconds = 0.0
        jax.monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, event: str, duration: float, **_: Any) -> None:
        if event == JAX_COMPILE_EVENT:
            self.count += 1
            self.seconds += duration


def differentiable_max_pool(original: Callable) -> Callable:
    """torchax's max pool with indices, made differentiable.

    torchax computes the argmax indices with a variadic reduce_window, which JAX cannot
    linearize, so `jax.grad` of any model with max pooling fails. Here the indices come from
    the input with its gradient stopped, and the values are gathered at those indices.
    """
    import jax
    import jax.numpy as jnp

    def max_pool(inputs, kernel_size, strides=None, padding=0, dilation=1, ceil_mode=False):
        _, indices = original(
            jax.lax.stop_gradient(inputs), kernel_size, strides, padding, dilation, ceil_mode
        )
        spatial = len(kernel_size)
        leading = inputs.shape[:-spatial]
        flat_inputs = inputs.reshape(*leading, -1)
        flat_indices = indices.reshape(*leading, -1)
        values = jnp.take_along_axis(flat_inputs, flat_indices, axis=-1)
        return values.reshape(indices.shape), indices

    return max_pool


def max_pool_overrides() -> dict[Any, Callable]:
    """JAX implementations that replace torchax's for ATen ops JAX cannot differentiate."""
    from torchax.ops import ops_registry

    overrides = {}
    for op in (torch.ops.aten.max_pool2d_with_indices, torch.ops.aten.max_pool3d_with_indices):
        registered = ops_registry.all_aten_ops.get(op)
        if registered is not None and registered.is_jax_function:
            overrides[op] = differentiable_max_pool(registered.func)
    return overrides


class ExtractedFunction:
    """torchax.extract_jax: states by name and f(states, args, kwargs) -> outputs."""

    def __init__(self, module: torch.nn.Module, env: Any, overrides: dict[Any, Callable]) -> None:
        import torchax
        from torchax.ops import ops_registry

        for op, implementation in overrides.items():
            # Environment.override_op_definition of torchax 0.0.13 builds an Operator
            # without its is_view_op field, so the entry is made here as it would make it.
            env._ops[op] = ops_registry.Operator(
                op, implementation, is_jax_function=True, is_user_defined=True,
                needs_env=False, is_view_op=False,
            )
        # Like torchax.extract_jax, but tied weights (an LM head sharing the embedding)
        # stay tied: named_parameters() lists a tied weight once, and functional_call
        # only substitutes the alias when told to keep the ties.
        states = dict(module.named_buffers())
        states.update(module.named_parameters())
        self.states = env.t2j_copy(states)
        self._module = module
        self._env = env

    def __call__(self, states: dict[str, Any], args: Any, kwargs: Any) -> Any:
        env = self._env
        states, args, kwargs = env.j2t_iso((states, args, kwargs))
        with env:
            outputs = torch.func.functional_call(self._module, states, args, kwargs,
                                                 tie_weights=True)
        return env.t2j_iso(outputs)


class ExportedFunction:
    """torch.export, then the exported ATen graph interpreted as JAX functions by torchax."""

    def __init__(
        self,
        module: torch.nn.Module,
        sample: ModelInputs,
        env: Any,
        overrides: dict[Any, Callable],
    ) -> None:
        import torchax

        exported = torch.export.export(module, tuple(sample.args), dict(sample.kwargs))
        exported = exported.run_decompositions()
        exported = exported.run_decompositions(torchax.decompositions.DECOMPOSITIONS)
        self.exported = exported
        self.overrides = overrides
        signature = exported.graph_signature
        kinds = torch.export.graph_signature.InputKind
        self.input_specs = signature.input_specs
        self.user_output = [
            spec.kind == torch.export.graph_signature.OutputKind.USER_OUTPUT
            for spec in signature.output_specs
        ]
        stored = dict(exported.state_dict)
        stored.update(getattr(exported, "constants", {}) or {})
        states = {
            spec.target: stored[spec.target]
            for spec in self.input_specs
            if spec.kind != kinds.USER_INPUT
        }
        self.states = env.t2j_copy(states)
        self._user_input = kinds.USER_INPUT
        self._interpreter = overriding_interpreter_class()

    def __call__(self, states: dict[str, Any], args: Any, kwargs: Any) -> Any:
        user_inputs = iter(torch_pytree.tree_leaves((tuple(args), dict(kwargs))))
        placeholders = [
            next(user_inputs) if spec.kind == self._user_input else states[spec.target]
            for spec in self.input_specs
        ]
        interpreter = self._interpreter(self.exported.graph_module, self.overrides)
        results = interpreter.run(*placeholders, enable_io_processing=False)
        outputs = [value for value, keep in zip(results, self.user_output) if keep]
        return torch_pytree.tree_unflatten(outputs, self.exported.call_spec.out_spec)


def overriding_interpreter_class() -> type:
    import torchax.export

    class Interpreter(torchax.export.JaxInterpreter):
        """torchax's graph interpreter, with some ATen ops implemented differently."""

        def __init__(self, graph_module, overrides: dict[Any, Callable]) -> None:
            super().__init__(graph_module)
            self.overrides = overrides

        def call_function(self, target, args, kwargs):
            packet = getattr(target, "overloadpacket", None)
            implementation = self.overrides.get(target) or self.overrides.get(packet)
            if implementation is not None:
                return implementation(*args, **kwargs)
            return super().call_function(target, args, kwargs)

    return Interpreter


class TorchaxPreparedModel(PreparedModel):
    """A module as one jitted JAX function on JAX's default device (JAX_PLATFORMS)."""

    def __init__(self, bench: BenchmarkModel, experiment: ExperimentConfig) -> None:
        import jax

        self.torchax = import_torchax()
        self.jax = jax
        jax.config.update(
            "jax_default_matmul_precision",
            "highest" if experiment.disable_tf32 else JAX_MATMUL_PRECISION[experiment.matmul_precision],
        )
        self.compiles = CompileCounter()
        self.env = self.torchax.default_env()
        self.bench = bench
        self.experiment = experiment
        self.training = experiment.test == "train"
        self.dtype = parameter_dtype(experiment.precision)
        self.autocast_dtype = amp_dtype(experiment.precision, experiment.accelerator,
                                        experiment.amp_dtype)
        # The module stays on the CPU for torch: JAX alone owns the accelerator.
        module = bench.module.to(device="cpu", dtype=self.dtype)
        module.train(self.training)
        overrides = max_pool_overrides() if self.training else {}
        if experiment.torch_xla2 == "torch_export":
            sample = self._cast(bench.make_inputs(0))
            function: Any = ExportedFunction(module, sample, self.env, overrides)
        else:
            function = ExtractedFunction(module, self.env, overrides)
        self.forward = function
        trainable = {name for name, p in module.named_parameters() if p.requires_grad}
        states = function.states
        self.params = {k: v for k, v in states.items() if k in trainable}
        self.buffers = {k: v for k, v in states.items() if k not in trainable}
        self.optimizer_state = self._initial_optimizer_state()
        self.jitted = jax.jit(self._train_step if self.training else self._eval_step)
        self._compiles_at_run_start = 0
        self._compile_seconds_at_run_start = 0.0

    def _cast(self, inputs: ModelInputs) -> ModelInputs:
        return ModelInputs(
            args=cast_floating(inputs.args, "cpu", self.dtype),
            kwargs=cast_floating(inputs.kwargs, "cpu", self.dtype),
            targets=cast_floating(inputs.targets, "cpu", self.dtype),
        )

    def _autocast(self):
        return self.torchax.amp.autocast(None, self.autocast_dtype, env=self.env) \
            if self.autocast_dtype is not None else _null_context()

    def _outputs(self, params, buffers, args, kwargs):
        with self._autocast():
            return self.forward({**params, **buffers}, args, kwargs)

    def _eval_step(self, params, buffers, optimizer_state, args, kwargs, targets):
        return as_jax_pytree(self._outputs(params, buffers, args, kwargs))

    def _loss(self, params, buffers, args, kwargs, targets):
        outputs = self._outputs(params, buffers, args, kwargs)
        env = self.env
        with env:
            torch_outputs, torch_args, torch_kwargs, torch_targets = env.j2t_iso(
                (outputs, args, kwargs, targets)
            )
            loss = self.bench.loss_fn(
                torch_outputs, ModelInputs(torch_args, torch_kwargs, torch_targets)
            )
        return env.t2j_iso(loss)

    def _train_step(self, params, buffers, optimizer_state, args, kwargs, targets):
        loss, gradients = self.jax.value_and_grad(self._loss)(
            params, buffers, args, kwargs, targets
        )
        params, optimizer_state = self._update(params, gradients, optimizer_state)
        return {"loss": loss, "gradients": gradients}, params, optimizer_state

    def _optimizer(self) -> Optional[str]:
        """sgd, adam or None; the harness's optimizer is Adam here (on CUDA; none elsewhere)."""
        optimizer = self.experiment.optimizer_in_effect()
        return "adam" if optimizer == "harness" else optimizer

    def _initial_optimizer_state(self) -> Any:
        if not self.training or self._optimizer() != "adam":
            return None
        import jax.numpy as jnp

        zeros = self.jax.tree_util.tree_map(jnp.zeros_like, self.params)
        return {"step": jnp.zeros((), jnp.int32), "m": zeros, "v": zeros}

    def _update(self, params, gradients, state):
        tree_map = self.jax.tree_util.tree_map
        optimizer = self._optimizer()
        if optimizer == "sgd":
            return tree_map(lambda p, g: p - LEARNING_RATE * g, params, gradients), state
        if optimizer == "adam":
            import jax.numpy as jnp

            beta1, beta2 = ADAM_BETAS
            step = state["step"] + 1
            m = tree_map(lambda m, g: beta1 * m + (1 - beta1) * g, state["m"], gradients)
            v = tree_map(lambda v, g: beta2 * v + (1 - beta2) * g * g, state["v"], gradients)
            scale1 = 1 - beta1 ** step.astype(jnp.float32)
            scale2 = 1 - beta2 ** step.astype(jnp.float32)
            params = tree_map(
                lambda p, m, v: p - LEARNING_RATE * (m / scale1)
                / (jnp.sqrt(v / scale2) + ADAM_EPSILON),
                params, m, v,
            )
            return params, {"step": step, "m": m, "v": v}
        return params, state

    def inputs_to_device(self, inputs: ModelInputs) -> tuple[Any, Any, Any]:
        cast = self._cast(inputs)
        return self.env.t2j_copy((tuple(cast.args), dict(cast.kwargs), cast.targets))

    def step(self, device_inputs: tuple[Any, Any, Any]) -> Any:
        args, kwargs, targets = device_inputs
        if not self.training:
            return self.jitted(
                self.params, self.buffers, self.optimizer_state, args, kwargs, targets
            )
        result, self.params, self.optimizer_state = self.jitted(
            self.params, self.buffers, self.optimizer_state, args, kwargs, targets
        )
        return result

    def sync_run(self, last_result: Any) -> None:
        self.jax.block_until_ready((last_result, self.params))

    def begin_timed_run(self) -> None:
        self._compiles_at_run_start = self.compiles.count
        self._compile_seconds_at_run_start = self.compiles.seconds

    def end_timed_run(self) -> dict[str, float]:
        return {
            "jax_compile_count": self.compiles.count - self._compiles_at_run_start,
            "jax_compile_time_s": self.compiles.seconds - self._compile_seconds_at_run_start,
            "jax_jit_cache_size": self.jit_cache_size(),
        }

    def jit_cache_size(self) -> int:
        size = getattr(self.jitted, "_cache_size", None)
        return int(size()) if callable(size) else -1

    def final_metrics(self) -> dict[str, Any]:
        metrics: dict[str, Any] = {
            "jax_compile_count_total": self.compiles.count,
            "jax_compile_time_total_s": self.compiles.seconds,
        }
        device = self.jax.devices()[0]
        if device.platform != "cpu":
            try:
                stats = device.memory_stats() or {}
            except Exception:  # not every PJRT plugin reports memory
                stats = {}
            if "peak_bytes_in_use" in stats:
                metrics["peak_device_memory_bytes"] = int(stats["peak_bytes_in_use"])
        return metrics

    def result_to_host(self, result: Any) -> Any:
        return to_cpu(self.env.j2t_copy(result))

    def graph_ir(self, ir_format: str, device_inputs: Any) -> Optional[str]:
        """The jitted step lowered for these inputs: StableHLO, or HLO text."""
        dialects = {"stablehlo": "stablehlo", "hlo": "hlo"}
        if ir_format not in dialects:
            return None
        args, kwargs, targets = device_inputs
        lowered = self.jitted.lower(
            self.params, self.buffers, self.optimizer_state, args, kwargs, targets
        )
        return lowered.as_text(dialect=dialects[ir_format])

    def xla_trace(self, log_dir: str):
        """JAX's profiler (XPlane) around the block, written under `log_dir`."""
        return self.jax.profiler.trace(log_dir)

    def accelerator_model(self) -> str:
        device = self.jax.devices()[0]
        if device.platform == "cpu":
            return cpu_model_name()
        return str(device.device_kind)


def _null_context():
    import contextlib

    return contextlib.nullcontext()


def as_jax_pytree(value: Any) -> Any:
    """Outputs JAX can return from a jitted function: model-output objects (mappings that
    JAX does not know, like transformers' ModelOutput) and dataclasses become dicts."""
    if isinstance(value, Mapping):
        return {key: as_jax_pytree(item) for key, item in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: as_jax_pytree(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(as_jax_pytree(item) for item in value))
    if isinstance(value, (list, tuple)):
        return type(value)(as_jax_pytree(item) for item in value)
    return value
