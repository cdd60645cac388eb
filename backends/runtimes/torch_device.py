"""Shared child-side machinery for stacks that run torch modules on a torch device.

Eager, dynamo backends, PyTorch/XLA lazy tensor and openxla all place the module on a
torch device, optionally wrap it, and run the same eval or train step; they differ in the
device, the wrapper and how they synchronize.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from dataclasses import dataclass, field, is_dataclass
from typing import Any, Callable, Optional

import torch

from backends.base import DeviceTimer, PreparedModel
from core.host.machine import cpu_model_name
from models.base import BenchmarkModel, ModelInputs
from core.config import ExperimentConfig
from backends.runtimes.precision import amp_dtype, cast_floating, parameter_dtype

log = logging.getLogger(__name__)

#: Inductor's module that owns its pool of compile worker processes.
INDUCTOR_COMPILE_POOL = "torch._inductor.async_compile"

#: The optimizer as PyTorch's harness trains with it on CUDA (common.py's init_optimizer):
#: Adam, capturable and foreach, at lr 0.01; SGD (foreach, lr 0.01, its step left out of the
#: compiled graphs) for the models its BENCHMARK_USE_SGD names; none on other devices.
HARNESS = "harness"
HARNESS_LR = 0.01


@dataclass(frozen=True)
class OptimizerSettings:
    """An optimizer class (torch.optim) with its keyword arguments, and whether its step
    stays out of the compiled graphs."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    compiled_step: bool = True

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, **self.options, "compiled_step": self.compiled_step}


def optimizer_settings(name: Optional[str],
                       harness_optimizer: str = "adam") -> Optional[OptimizerSettings]:
    """The optimizer of a training experiment: none, sgd or adam (lr 1e-3), or the harness's
    (`harness_optimizer`, "adam", "sgd" or "none", is what it uses for the model on CUDA)."""
    if not name:
        return None
    if name == "sgd":
        return OptimizerSettings("SGD", {"lr": 1e-3})
    if name == "adam":
        return OptimizerSettings("Adam", {"lr": 1e-3})
    if name == HARNESS:
        if harness_optimizer == "none":
            return None
        if harness_optimizer == "sgd":
            return OptimizerSettings("SGD", {"lr": HARNESS_LR, "foreach": True},
                                     compiled_step=False)
        return OptimizerSettings("Adam", {"lr": HARNESS_LR, "capturable": True, "foreach": True})
    raise ValueError(f"unknown optimizer {name!r}; expected none, sgd, adam or harness")


def make_optimizer(settings: OptimizerSettings, parameters: list) -> torch.optim.Optimizer:
    """The optimizer over `parameters`; `capturable` only where they are on CUDA (it keeps
    the step's scalars on the device; the meta tensors that FLOPs are counted on, and XLA's
    devices, take the plain step)."""
    options = dict(settings.options)
    if any(p.device.type != "cuda" for p in parameters):
        options.pop("capturable", None)
    optimizer = getattr(torch.optim, settings.name)(parameters, **options)
    if not settings.compiled_step:
        optimizer.step = torch._dynamo.disable(optimizer.step)
    return optimizer


def call_module(module: Callable, inputs: ModelInputs) -> Any:
    return module(*inputs.args, **inputs.kwargs)


def start_inductor_compile_workers() -> None:
    """Inductor's compile worker pool, started as inductor starts it at its first compile
    (benchmarks/fidelity/harness_on_fast_core.py starts the harness's with this too)."""
    try:
        from torch._inductor.async_compile import maybe_warm_pool
    except ImportError:  # a torch without it starts its pool at the compile
        return
    maybe_warm_pool()


class TorchPreparedModel(PreparedModel):
    """A torch module on `device`, called through `wrap(module)`."""

    def __init__(
        self,
        bench: BenchmarkModel,
        experiment: ExperimentConfig,
        device: torch.device,
        wrap: Optional[Callable[[torch.nn.Module], Callable]] = None,
        compile_iteration: Optional[Callable[[Callable], Callable]] = None,
    ) -> None:
        """`wrap` wraps the module (where there is no `compile_iteration`);
        `compile_iteration` compiles the whole iteration instead, as PyTorch's harness
        compiles its forward_pass (inference: the forward under autocast) and its
        forward_and_backward_pass (training: forward and loss, the backward that follows the
        graph break, and the optimizer's step; zeroing the gradients stays out)."""
        self.bench = bench
        self.experiment = experiment
        self.device = device
        self.dtype = parameter_dtype(experiment.precision)
        self.autocast_dtype = amp_dtype(
            experiment.precision, experiment.accelerator, experiment.amp_dtype
        )
        self.module = bench.module.to(device=device, dtype=self.dtype)
        self.training = experiment.test == "train"
        self.module.train(self.training)
        self.parameters = [p for p in self.module.parameters() if p.requires_grad]
        settings = optimizer_settings(experiment.optimizer_in_effect(), bench.harness_optimizer)
        self.optimizer = make_optimizer(settings, self.parameters) if settings else None
        self.callable = wrap(self.module) if wrap and compile_iteration is None else self.module
        iteration = self._train_iteration if self.training else self._eval_iteration
        self.iteration = compile_iteration(iteration) if compile_iteration else iteration

    def inputs_to_device(self, inputs: ModelInputs) -> ModelInputs:
        return ModelInputs(
            args=cast_floating(inputs.args, self.device, self.dtype),
            kwargs=cast_floating(inputs.kwargs, self.device, self.dtype),
            targets=cast_floating(inputs.targets, self.device, self.dtype),
        )

    def step(self, device_inputs: ModelInputs) -> Any:
        if self.training:
            return self.iteration(device_inputs)
        with torch.no_grad():
            return self.iteration(device_inputs)

    def _eval_iteration(self, device_inputs: ModelInputs) -> Any:
        """The forward under autocast. Compiled whole where the stack compiles iterations, as
        PyTorch's harness compiles its forward_pass: autocast is then part of the graph, and
        a call runs dynamo's frame and the graph without entering autocast or the model's
        nn.Module call machinery first (benchmarks/cost/call_overhead.py)."""
        if self.autocast_dtype is None:  # no autocast in the graph, as the harness's nullcontext
            return call_module(self.callable, device_inputs)
        # torch.autocast made in this frame, so that dynamo traces it (see _train_iteration).
        with torch.autocast(self.device.type, dtype=self.autocast_dtype):
            return call_module(self.callable, device_inputs)

    def forward_context(self) -> contextlib.ExitStack:
        """No grad in inference and autocast to `autocast_dtype` where there is one, as
        `step` and the iteration enter them around the model's forward."""
        context = contextlib.ExitStack()
        if not self.training:
            context.enter_context(torch.no_grad())
        if self.autocast_dtype is not None:
            context.enter_context(torch.autocast(self.device.type, dtype=self.autocast_dtype))
        return context

    @torch._disable_dynamo(recursive=True)
    def _zero_grad(self) -> None:
        for parameter in self.parameters:
            parameter.grad = None

    def _train_iteration(self, device_inputs: ModelInputs) -> Any:
        """Zero the gradients, forward and loss (autocast), backward, the optimizer's step."""
        self._zero_grad()
        # torch.autocast made in this frame: dynamo traces it into the compiled graph, as in
        # PyTorch's harness. One a helper returns is entered outside the graph, which then
        # returns the model's whole output (a language model's logits) besides the loss.
        # Without amp no autocast at all, as the harness's nullcontext: where the iteration
        # breaks inside the block (timm's loss, a model's own breaks), dynamo resumes in a
        # frame that enters and leaves the autocast again, and a disabled one still makes
        # that frame a graph of its own, compiled and called every iteration.
        with (torch.autocast(self.device.type, dtype=self.autocast_dtype)
              if self.autocast_dtype is not None else contextlib.nullcontext()):
            output = call_module(self.callable, device_inputs)
            loss = self.bench.loss_fn(output, device_inputs)
        loss.backward()
        if self.optimizer is not None:
            self.optimizer.step()
        return loss

    def start_background_work(self) -> None:
        """Start inductor's compile workers now, as inductor starts them at its first
        compile: a process inherits the CPUs of the thread that starts it, and the child's
        main thread is about to be pinned to one core for the cold start (where inductor
        times its kernels' configurations)."""
        if self.experiment.dynamo == "inductor":
            start_inductor_compile_workers()

    def settle(self) -> None:
        """Shut inductor's compile workers down. Inductor starts a pool of as many worker
        processes as the child has cores before it compiles; where the compile is short (its
        caches warm, as in every timing process after the first), the workers are still
        starting (importing torch) when the timed runs begin, on the same cores."""
        pool = sys.modules.get(INDUCTOR_COMPILE_POOL)
        if pool is None:
            return
        started = time.monotonic()
        pool.shutdown_compile_workers()
        log.info("inductor's compile workers shut down in %.2f s",
                 time.monotonic() - started)

    def sync_run(self, last_result: Any) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def gradients(self) -> dict[str, Any]:
        """Gradients by parameter name (training), for the verifier."""
        return {
            name: p.grad
            for name, p in self.module.named_parameters()
            if p.requires_grad
        }

    def result_to_host(self, result: Any) -> Any:
        if self.training:
            result = {"loss": result, "gradients": self.gradients()}
        return to_cpu(result)

    def reset_peak_device_memory(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def peak_device_memory_bytes(self) -> Optional[int]:
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        return None

    def accelerator_model(self) -> str:
        if self.device.type == "cuda":
            return torch.cuda.get_device_name(self.device)
        return cpu_model_name()

    def device_timer(self) -> Optional[DeviceTimer]:
        if self.device.type == "cuda":
            return CudaEventTimer(self.device)
        return None


class CudaEventTimer(DeviceTimer):
    """CUDA events recorded on the current stream around each span of work."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._spans: list[tuple[Any, Any]] = []
        self._start: Any = None

    def _event(self) -> Any:
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))
        return event

    def begin(self) -> None:
        self._start = self._event()

    def end(self) -> None:
        self._spans.append((self._start, self._event()))

    def seconds(self) -> float:
        return sum(self.span_seconds())

    def span_seconds(self) -> list[float]:
        torch.cuda.synchronize(self.device)
        spans = [start.elapsed_time(end) / 1e3 for start, end in self._spans]
        self._spans.clear()
        return spans


#: How deep to_cpu looks into plain objects' attributes for tensors.
OBJECT_DEPTH = 6


def to_cpu(value: Any, depth: int = 0) -> Any:
    """Detach and move every tensor of a nested value (outputs objects included) to CPU.

    A plain object holding tensors in its attributes (a transformers cache: its layers' keys
    and values) becomes the mapping of those attributes, so that the verifier compares its
    tensors leaf by leaf rather than the objects, which are never equal between two runs.
    Objects holding no tensor stay as they are."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(to_cpu(v, depth) for v in value)
    if isinstance(value, dict):
        converted = {k: to_cpu(v, depth) for k, v in value.items()}
        try:
            return type(value)(converted)
        except Exception:  # output classes with a special constructor
            return converted
    attributes = _plain_attributes(value)
    if attributes and depth < OBJECT_DEPTH:
        held = {name: item for name, item in attributes.items() if _holds_tensor(item, depth + 1)}
        if held:
            return {name: to_cpu(item, depth + 1) for name, item in held.items()}
    return value


def _plain_attributes(value: Any) -> Optional[dict[str, Any]]:
    """The instance attributes of a plain object: not a class, a module, or a dataclass (the
    verifier walks those itself, by attribute)."""
    if (isinstance(value, (type, torch.nn.Module)) or is_dataclass(value)
            or not hasattr(value, "__dict__")):
        return None
    return vars(value)


def _holds_tensor(value: Any, depth: int) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if depth > OBJECT_DEPTH:
        return False
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(item, depth) for item in value)
    if isinstance(value, dict):
        return any(_holds_tensor(item, depth) for item in value.values())
    attributes = _plain_attributes(value)
    return bool(attributes) and any(_holds_tensor(item, depth + 1)
                                    for item in attributes.values())
