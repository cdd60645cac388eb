"""The workload signature: what one iteration of an experiment actually runs.

Every line carries one (`workload`), so that two tools' figures can be checked to be the same
work: the parameters and buffers (count, bytes, dtypes), every input tensor (shape, dtype,
memory format, kind of values), the mode, the autocast dtype, what requires grad, the loss,
the optimizer with its settings, the fields of the eval output (a model that also returns a
cache, as the T5 family's decoder does when its config keeps `use_cache`, does more work than
one that does not, for the same FLOPs), the FLOPs of one iteration counted by
`torch.utils.flop_counter.FlopCounterMode` (forward only in eval; forward, loss, backward and
the optimizer's step in training), the random draws of that iteration (`random_operators`:
dropout masks, stochastic depth, which cost time and no FLOPs) and the probabilities they drop
with (`dropout_probabilities`: fused attention's cost depends on it), and the inductor
settings the model is compiled with (`inductor_settings`, the harness's per-model ones).

Counting stays cheap: the model is built again on the meta device (no memory, no
initialisation, no arithmetic), the inputs are made on the CPU (their values are described)
and moved to meta, and the count is cached per model, precision, batch size and versions in
the runner's cache folder (`core.host.machine.cache_root()/workload`).

The describing functions take any module and inputs, so `benchmarks/fidelity/workload_parity.py`
describes PyTorch's harness's models with the same code.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch
from torch.utils._pytree import tree_map_only
from torch.utils._python_dispatch import TorchDispatchMode

from core.columns import work_fields
from core.fields import MODEL
from core.host.machine import cache_root
from core.files.cached_json import write_json_atomically
from core.packages import COUNTED_PACKAGES, installed_packages
from core.files.side_files import (ShapeError, a_list, a_number, a_string, an_object,
                                   read_side_file, strings)

log = logging.getLogger(__name__)

#: Bump when the signature's shape or the way it is counted changes (the cache's key has it).
SIGNATURE_VERSION = 5
#: The key another reader (percent of peak) takes the count from.
FLOPS_KEY = "flops_per_iteration"
#: How far from 0 and 1 a float tensor's mean and standard deviation may be to be "normalised".
NORMALISED_TOLERANCE = 0.05


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def memory_format(tensor: torch.Tensor) -> str:
    """contiguous, channels_last (4-d) or channels_last_3d (5-d), else strided."""
    if tensor.dim() == 4 and not tensor.is_contiguous() and tensor.is_contiguous(
            memory_format=torch.channels_last):
        return "channels_last"
    if tensor.dim() == 5 and not tensor.is_contiguous() and tensor.is_contiguous(
            memory_format=torch.channels_last_3d):
        return "channels_last_3d"
    return "contiguous" if tensor.is_contiguous() else "strided"


def value_kind(tensor: torch.Tensor) -> dict[str, Any]:
    """What the values are: integers with their observed range, normalised floats (mean 0,
    standard deviation 1), other floats with their mean and spread; unknown on meta."""
    if tensor.device.type == "meta" or _is_fake(tensor):
        return {"kind": "unknown (meta tensor)"}
    if tensor.numel() == 0:
        return {"kind": "empty"}
    if tensor.dtype == torch.bool:
        return {"kind": "booleans", "true_fraction": round(float(tensor.float().mean()), 3)}
    if not tensor.is_floating_point():
        return {"kind": "integers", "min": int(tensor.min()), "max": int(tensor.max())}
    values = tensor.detach()
    if values.dtype not in (torch.float32, torch.float64):
        values = values.float()  # no copy of a large fp32 batch
    if values.numel() > 1:
        std_tensor, mean_tensor = torch.std_mean(values)
        std, mean = float(std_tensor), float(mean_tensor)
    else:
        std, mean = 0.0, float(values.mean())
    normalised = abs(mean) <= NORMALISED_TOLERANCE and abs(std - 1) <= NORMALISED_TOLERANCE
    return {"kind": "normalised floats" if normalised else "floats",
            "mean": round(mean, 3), "std": round(std, 3)}


def _is_fake(tensor: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(tensor, FakeTensor)


def describe_tensor(name: str, tensor: torch.Tensor,
                    values: Optional[torch.Tensor] = None) -> dict[str, Any]:
    """One input: its name, shape, dtype, memory format, bytes and kind of values (read
    from `values`, a real copy, when `tensor` is on meta)."""
    return {
        "name": name,
        "shape": list(tensor.shape),
        "dtype": dtype_name(tensor.dtype),
        "memory_format": memory_format(tensor),
        "bytes": tensor.numel() * tensor.element_size(),
        "requires_grad": bool(tensor.requires_grad),
        "values": value_kind(values if values is not None else tensor),
    }


def named_tensors(value: Any, prefix: str) -> list[tuple[str, torch.Tensor]]:
    """Every tensor of a nested value with its path (args[0], input_ids, targets, ...)."""
    if isinstance(value, torch.Tensor):
        return [(prefix, value)]
    found: list[tuple[str, torch.Tensor]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += named_tensors(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found += named_tensors(item, f"{prefix}[{index}]")
    return found


def describe_inputs(args: Any, kwargs: Any, targets: Any = None,
                    real: Optional[tuple[Any, Any, Any]] = None) -> list[dict[str, Any]]:
    """Every input tensor of one call (positional, keyword, and the loss's targets), in
    name order for keywords; `real` holds the same inputs with values, when these are on
    meta."""
    tensors = (named_tensors(tuple(args), "args") + named_tensors(dict(sorted(kwargs.items())), "")
               + named_tensors(targets, "targets"))
    reals = dict(named_tensors(tuple(real[0]), "args") + named_tensors(dict(sorted(real[1].items())), "")
                 + named_tensors(real[2], "targets")) if real else {}
    return [describe_tensor(name, tensor, reals.get(name)) for name, tensor in tensors]


def tensor_group(tensors: list[torch.Tensor]) -> dict[str, Any]:
    """Count of elements, bytes and the elements of each dtype."""
    dtypes: dict[str, int] = {}
    for tensor in tensors:
        dtypes[dtype_name(tensor.dtype)] = dtypes.get(dtype_name(tensor.dtype), 0) + tensor.numel()
    return {
        "count": sum(t.numel() for t in tensors),
        "tensors": len(tensors),
        "bytes": sum(t.numel() * t.element_size() for t in tensors),
        "dtypes": dict(sorted(dtypes.items())),
    }


def describe_module(module: torch.nn.Module) -> dict[str, Any]:
    """Parameters (all, and those that require grad) and buffers; shared ones once."""
    parameters = list(module.parameters())
    trainable = [p for p in parameters if p.requires_grad]
    return {
        "parameters": {**tensor_group(parameters),
                       "requires_grad": sum(p.numel() for p in trainable)},
        "buffers": tensor_group(list(module.buffers())),
        "module_class": type(module).__name__,
        "training": bool(module.training),
        "active_dropout": sum(1 for m in module.modules()
                              if isinstance(m, torch.nn.modules.dropout._DropoutNd)
                              and m.p > 0 and m.training),
    }


def describe_output(value: Any) -> str:
    """What one output field holds: a tensor's shape and dtype, a sequence's length, else its
    class (a cache object)."""
    if isinstance(value, torch.Tensor):
        return f"tensor {list(value.shape)} {dtype_name(value.dtype)}"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} of {len(value)}"
    return type(value).__name__


def describe_outputs(output: Any) -> Optional[list[str]]:
    """The fields of a call's output, as 'name: what' (a mapping's keys, a transformers
    ModelOutput's included, in order; a sequence's positions); None for no output."""
    if output is None:
        return None
    if isinstance(output, dict):
        return [f"{key}: {describe_output(value)}" for key, value in output.items()]
    if isinstance(output, (list, tuple)):
        return [f"[{index}]: {describe_output(value)}" for index, value in enumerate(output)]
    return [f"output: {describe_output(output)}"]


#: ATen operators that draw random numbers (dropout masks, stochastic depth, LayerDrop).
RANDOM_OPERATORS = frozenset({
    "bernoulli", "bernoulli_", "native_dropout", "rand", "rand_like", "randn", "randn_like",
    "randint", "randint_like", "randperm", "uniform_", "normal_", "multinomial",
    "exponential_", "geometric_", "log_normal_", "cauchy_", "random_",
})


class RandomOperatorCounter(TorchDispatchMode):
    """Counts the random draws of what runs under it: the operators of RANDOM_OPERATORS, and
    fused attention called with a positive dropout_p. `dropped` counts the draws by the
    probability they drop with: fused attention's dropout_p, native_dropout's p, and one
    minus a bernoulli's float p (dropout and stochastic depth draw the keep mask). The
    probability changes the work: on CUDA, fused attention at p = 1e-30 runs as fast as
    without dropout, and at 0.1 its forward takes twice as long."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.dropped: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name.startswith("_scaled_dot_product"):
            dropped: Optional[float] = float(_argument(func, args, kwargs, "dropout_p") or 0.0)
            drew = dropped > 0
        else:
            drew = name in RANDOM_OPERATORS
            dropped = _drop_probability(name, _argument(func, args, kwargs, "p")) if drew else None
        if drew:
            self.count += 1
            if dropped is not None:
                self.dropped[f"{dropped:.3g}"] += 1
        return func(*args, **kwargs)


def _drop_probability(name: str, p: Any) -> Optional[float]:
    """The probability a draw drops with, from its float `p`: native_dropout's is the one to
    drop, a bernoulli's the one to keep; None for other draws (or a tensor p)."""
    if not isinstance(p, float):
        return None
    if name == "native_dropout":
        return p
    return 1.0 - p if name in ("bernoulli", "bernoulli_") else None


def _argument(func: Any, args: tuple, kwargs: dict, name: str) -> Any:
    """The value of an ATen call's argument `name` (its default where not passed), read from
    the operator's schema; None where the schema has no such argument."""
    for index, argument in enumerate(func._schema.arguments):
        if argument.name == name:
            default = argument.default_value if argument.has_default_value() else None
            return kwargs.get(name, args[index] if index < len(args) else default)
    return None


@dataclass(frozen=True)
class IterationCount:
    """What counting one iteration found: its FLOPs and random draws, or why it could not."""

    flops: Optional[int]
    random_operators: Optional[int]
    error: Optional[str] = None
    # The draws by the probability they drop with (RandomOperatorCounter.dropped).
    dropped: Optional[dict[str, int]] = None


def count_iteration(iteration: Callable[[], Any]) -> IterationCount:
    """FLOPs (FlopCounterMode) and random draws of one call of `iteration`, or None and why
    they could not be counted."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        counter, draws = FlopCounterMode(display=False), RandomOperatorCounter()
        with counter, draws:
            iteration()
        return IterationCount(int(counter.get_total_flops()), draws.count,
                              dropped=dict(sorted(draws.dropped.items())))
    except Exception as error:  # a model the meta device cannot run: no count, and why
        first_line = str(error).splitlines()[0][:300] if str(error) else ""
        return IterationCount(None, None, f"{type(error).__name__}: {first_line}")


def to_fake(value: Any, mode: Any) -> Any:
    """Every tensor of a nested value as a fake tensor of `mode`."""
    return tree_map_only(torch.Tensor, mode.from_tensor, value)


def to_meta(value: Any) -> Any:
    """Every tensor of a nested value as a meta tensor of the same shape, dtype and layout."""
    return tree_map_only(torch.Tensor, lambda tensor: tensor.to("meta"), value)


@dataclass(frozen=True)
class IterationSpec:
    """What one iteration does, besides the module and its inputs."""

    mode: str  # eval or train
    autocast_dtype: Optional[str] = None
    loss: Optional[str] = None
    optimizer: Optional[dict[str, Any]] = None
    steps: tuple[str, ...] = ()
    # Inductor settings the model is compiled with (none where nothing compiles with inductor).
    inductor_settings: dict[str, Any] = field(default_factory=dict)


def signature(module: torch.nn.Module, inputs: tuple[Any, Any, Any], spec: IterationSpec,
              iteration: Callable[[], Any], real_inputs: Optional[tuple[Any, Any, Any]] = None,
              ) -> dict[str, Any]:
    """The signature of `module` run on `inputs` (args, kwargs, targets) as `spec` says;
    `iteration` runs one iteration (on meta tensors, for the count) and returns the model's
    output in eval."""
    described = describe_module(module)
    input_list = describe_inputs(*inputs, real=real_inputs)
    if spec.mode == "eval":
        # Inference runs without grad: nothing needs it, and FlopCounterMode's module
        # tracker fails on a parameter passed as an argument under no_grad (SigLIP's
        # attention pooling). The FLOPs are the same.
        for parameter in module.parameters():
            parameter.requires_grad_(False)
    outputs: list[Any] = []
    counted = count_iteration(lambda: outputs.append(iteration()))
    parameters, buffers = described["parameters"], described["buffers"]
    result: dict[str, Any] = {
        "signature_version": SIGNATURE_VERSION,
        "mode": spec.mode,
        "autocast_dtype": spec.autocast_dtype,
        "parameters": parameters,
        "buffers": buffers,
        "inputs": input_list,
        "requires_grad": ("parameters" if spec.mode == "train" and parameters["requires_grad"]
                          else "nothing"),
        "loss": spec.loss if spec.mode == "train" else None,
        "optimizer": spec.optimizer if spec.mode == "train" else None,
        "iteration_steps": list(spec.steps),
        "inductor_settings": dict(spec.inductor_settings),
        "outputs": describe_outputs(outputs[0]) if outputs and spec.mode == "eval" else None,
        "active_dropout": described["active_dropout"],
        "random_operators": counted.random_operators,
        "dropout_probabilities": counted.dropped,
        "weight_bytes": parameters["bytes"] + buffers["bytes"],
        "input_bytes": sum(item["bytes"] for item in input_list),
        FLOPS_KEY: counted.flops,
        "flops_counted": ("forward" if spec.mode == "eval"
                          else "forward, loss, backward and optimizer step"),
    }
    if counted.error is not None:
        result["flops_error"] = counted.error
    return result


# The cache: one JSON file per key, written atomically.

def cache_path(key: dict[str, Any], folder: Optional[Path] = None) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
    return (folder or cache_root() / "workload") / f"{digest[:32]}.json"


#: The most FLOPs one iteration is taken to run (a count of FlopCounterMode's is a 64-bit
#: integer; the largest models run about 1e18 per iteration): a larger count read from the
#: cache is not one this runner wrote, and would make TFLOP/s overflow.
MAX_FLOPS_PER_ITERATION = 2**63 - 1
#: The most bytes or elements a workload's counts hold (the same bound).
MAX_COUNT = 2**63 - 1


def a_count(value: Any, where: str, maximum: int = MAX_COUNT) -> int:
    """A whole number from 0 to `maximum` (an integral float, as another JSON writer may
    give it, counts; a boolean does not)."""
    number = a_number(value, where)
    if number != int(number) or not 0 <= number <= maximum:
        raise ShapeError(f"{where} is {value!r}, not a whole number from 0 to {maximum}")
    return int(number)


def tensor_group_shape(value: Any, where: str) -> None:
    group = an_object(value, where)
    for name in ("count", "tensors", "bytes"):
        a_count(group.get(name), f"{where}.{name}")
    for dtype, count in an_object(group.get("dtypes"), f"{where}.dtypes").items():
        a_count(count, f"{where}.dtypes.{dtype}")


def workload_shape(value: Any) -> dict[str, Any]:
    """A workload signature's shape, as `signature` writes it: its counts whole numbers
    within bounds, its parameters and buffers objects of counts, its inputs a list of
    objects each with its byte count, its outputs a list of strings or null."""
    workload = an_object(value, "its workload")
    a_count(workload.get(FLOPS_KEY), f"its workload's {FLOPS_KEY}", MAX_FLOPS_PER_ITERATION)
    tensor_group_shape(workload.get("parameters"), "its workload's parameters")
    tensor_group_shape(workload.get("buffers"), "its workload's buffers")
    for index, item in enumerate(a_list(workload.get("inputs"), "its workload's inputs")):
        a_count(an_object(item, f"its workload's inputs[{index}]").get("bytes"),
                f"its workload's inputs[{index}].bytes")
    for name in ("weight_bytes", "input_bytes"):
        a_count(workload.get(name), f"its workload's {name}")
    a_string(workload.get("mode"), "its workload's mode")
    if workload.get("outputs") is not None:
        strings(workload["outputs"], "its workload's outputs")
    return dict(workload)


def cache_entry_shape(data: Any) -> dict[str, Any]:
    """A cache entry's shape: {"key": {...}, "workload": {...}}, the workload as
    `workload_shape` checks it (a count of FLOPs within bounds, inputs a list, ...)."""
    entry = an_object(data, "the entry")
    an_object(entry.get("key"), "its key")
    return {**entry, "workload": workload_shape(entry.get("workload"))}


def cached(key: dict[str, Any], compute: Callable[[], dict[str, Any]],
           folder: Optional[Path] = None) -> dict[str, Any]:
    """The cached signature for `key`, else `compute()`'s, cached when its FLOPs counted.
    An entry that does not fit its shape is set aside and computed again; the warning is
    kept in the signature (`cache_warning`)."""
    path = cache_path(key, folder)
    read = read_side_file(path, cache_entry_shape, "the workload cache's entry")
    stored = read.value
    if stored is not None and stored["key"] == json.loads(json.dumps(key, default=str)):
        return {**stored["workload"], "cached": True}
    workload = compute()
    if workload.get(FLOPS_KEY) is not None:
        try:
            write_json_atomically(path, {"key": json.loads(json.dumps(key, default=str)),
                                         "workload": workload})
        except (OSError, TypeError, ValueError) as error:  # a cache not written costs a recount
            log.debug("the workload signature was not cached: %s", error)
    return {**workload, "cached": False,
            **({"cache_warning": read.warning} if read.warning else {})}


# The signature of one experiment of ours.

def loss_description(loss_fn: Callable) -> str:
    """The loss function's name and the first line of its docstring."""
    doc = (loss_fn.__doc__ or "").strip().splitlines()
    name = getattr(loss_fn, "__name__", type(loss_fn).__name__)
    return f"{name}: {doc[0]}" if doc else name


#: The packages whose versions a count depends on (core/packages.py: the one list).
VERSIONED_PACKAGES = COUNTED_PACKAGES


def versions() -> dict[str, Optional[str]]:
    """The versions a count depends on, None for a package not installed: this process's
    probe of the installed packages (core/packages.py), which a fork server made
    once for all its children (asked again, it cost each child 15 to 40 ms)."""
    packages = installed_packages()
    return {package: packages.get(package) for package in VERSIONED_PACKAGES}


def experiment_key(model: Any, experiment: Any, batch_size: Optional[int]) -> dict[str, Any]:
    """What an experiment's signature depends on: every field that changes the work
    (`changes_work` in core.fields: the model, test, precision, seed, optimizer, accelerator,
    as the harness's optimizer depends on it, ...), the batch size used, whether inductor
    compiles it (the model's inductor settings apply then), and versions."""
    return {
        "signature_version": SIGNATURE_VERSION,
        **{spec.name: getattr(model if spec.scope == MODEL else experiment, spec.name)
           for spec in work_fields()},
        "batch_size": batch_size,
        "inductor": experiment.dynamo == "inductor",
        "versions": versions(),
    }


def experiment_workload(suite: Any, model: Any, experiment: Any, batch_size: Optional[int],
                        folder: Optional[Path] = None) -> dict[str, Any]:
    """The signature of `model` under `experiment` as our child runs it, counted on meta
    tensors and cached (`folder`: the cache's folder, by default the runner's)."""
    key = experiment_key(model, experiment, batch_size)

    return cached(key, lambda: our_signature(suite, model.model_name, experiment, batch_size), folder)


def on_meta_or_fake(count: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """`count("meta")`, or `count("fake")` where the meta device cannot answer: code that reads
    a value (`.item()`, a tensor's truth) cannot run on meta tensors, while fake tensors
    (FakeTensorMode) make model libraries take the value-free paths they keep for tracing
    (transformers' is_tracing). Models are built on meta either way (building under a fake
    mode fails where a library reads values while it builds, as timm does), then their
    parameters and buffers are made fake (`make_fake`)."""
    workload = count("meta")
    if workload.get(FLOPS_KEY) is None and "meta tensors" in str(workload.get("flops_error")):
        try:
            fake = count("fake")
        except Exception as error:
            workload["flops_error"] += f"; on fake tensors: {type(error).__name__}: {error}"[:300]
            return workload
        if fake.get(FLOPS_KEY) is not None or "flops_error" not in workload:
            return fake
    return workload


def fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


def make_fake(module: torch.nn.Module, mode: Any) -> None:
    """Turn a meta module's parameters and buffers into fake tensors of `mode`, in place; a
    tensor shared by several modules (tied weights) stays one tensor."""
    made: dict[int, torch.Tensor] = {}

    def fake(tensor: torch.Tensor, parameter: bool) -> torch.Tensor:
        if id(tensor) not in made:
            converted = mode.from_tensor(tensor)
            made[id(tensor)] = (torch.nn.Parameter(converted, requires_grad=tensor.requires_grad)
                                if parameter else converted)
        return made[id(tensor)]

    for sub in module.modules():
        for name, parameter in list(sub._parameters.items()):
            if parameter is not None:
                sub._parameters[name] = fake(parameter, True)
        for name, buffer in list(sub._buffers.items()):
            if buffer is not None:
                sub._buffers[name] = fake(buffer, False)
        for name, value in list(vars(sub).items()):  # tensors kept as plain attributes
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                setattr(sub, name, fake(value, False))


def our_signature(suite: Any, model_name: str, experiment: Any,
                  batch_size: Optional[int]) -> dict[str, Any]:
    """Build the model on meta (or fake) tensors, its inputs on the CPU, and describe one
    iteration."""
    return on_meta_or_fake(lambda place: _our_signature(suite, model_name, experiment,
                                                        batch_size, place))


def _our_signature(suite: Any, model_name: str, experiment: Any, batch_size: Optional[int],
                   place: str) -> dict[str, Any]:
    from backends.runtimes.precision import amp_dtype, cast_floating, parameter_dtype
    from backends.runtimes.torch_device import make_optimizer, optimizer_settings
    from backends.stacks.dynamo import model_inductor_settings
    from models.base import ModelInputs

    training = experiment.test == "train"
    with torch.device("meta"):
        bench = suite.load(model_name, experiment.test, batch_size, seed=experiment.seed)
    dtype = parameter_dtype(experiment.precision)
    made = bench.make_inputs(experiment.seed)
    real = tuple(cast_floating(part, torch.device("cpu"), dtype)
                 for part in (made.args, made.kwargs, made.targets))
    # On meta as a whole (a buffer a library makes on the CPU while it builds, XLNet's, too).
    module = bench.module.to(device="meta", dtype=dtype).train(training)
    placed = to_meta(real)
    mode = fake_mode() if place == "fake" else None
    if mode is not None:
        make_fake(module, mode)
        placed = to_fake(placed, mode)
    autocast = amp_dtype(experiment.precision, experiment.accelerator, experiment.amp_dtype)
    settings = optimizer_settings(experiment.optimizer_in_effect(), bench.harness_optimizer)
    parameters = [p for p in module.parameters() if p.requires_grad]

    def iteration() -> Any:
        # Tensors a model makes while it runs land on meta too (some, XLNet's, would be
        # made on the CPU and meet meta ones otherwise).
        with (mode if mode is not None else torch.device("meta")):
            if not training:
                with torch.no_grad():
                    return module(*placed[0], **placed[1])
            for parameter in parameters:
                parameter.grad = None
            output = module(*placed[0], **placed[1])
            loss = bench.loss_fn(output, ModelInputs(placed[0], placed[1], placed[2]))
            loss.backward()
            if settings is not None:
                # capturable needs CUDA; it changes where the step's scalars live, not its
                # arithmetic (which FlopCounterMode does not count either way).
                make_optimizer(settings, parameters).step()
            return None

    spec = IterationSpec(
        mode=experiment.test,
        autocast_dtype=dtype_name(autocast) if autocast is not None else None,
        loss=loss_description(bench.loss_fn),
        optimizer=settings.describe() if settings is not None else None,
        steps=(("zero grad", "forward", "loss", "backward")
               + (("optimizer step",) if settings is not None else ())) if training
        else ("forward",),
        inductor_settings=model_inductor_settings(experiment, bench.inductor_settings),
    )
    workload = signature(module, placed, spec, iteration, real_inputs=real)
    workload["batch_size"] = bench.batch_size
    workload["parameter_dtype"] = dtype_name(dtype)
    workload["counted_on"] = f"{place} tensors"
    return workload
