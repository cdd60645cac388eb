"""Builds TorchBench models for the torchbench suite (imported in the child only)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, Optional

import torch

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, ModelInputs, eager_as_the_harness


def reduce_to_scalar_loss(output: Any) -> torch.Tensor:
    """A scalar from any output, as TorchBench's dynamo harness trains: means, averaged."""
    if isinstance(output, torch.Tensor):
        return output.sum() / output.numel()
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(output, dict):
        parts = list(output.values())
    elif isinstance(output, (list, tuple)):
        parts = list(output)
    else:
        raise TypeError(f"cannot reduce a {type(output).__name__} output to a loss")
    losses = [reduce_to_scalar_loss(part) for part in parts if _has_float_tensor(part)]
    if not losses:
        raise TypeError("the model's output holds no floating-point tensor to train on")
    return sum(losses) / len(losses)


def _has_float_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return value.is_floating_point()
    if isinstance(value, dict):
        return any(_has_float_tensor(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_float_tensor(v) for v in value)
    return isinstance(getattr(value, "loss", None), torch.Tensor)


@eager_as_the_harness
def torchbench_loss(output: Any, inputs: ModelInputs) -> torch.Tensor:
    return reduce_to_scalar_loss(output)


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_clone(v) for v in value)
    return value


def split_inputs(example_inputs: Any) -> tuple[tuple, dict]:
    """TorchBench example inputs as forward arguments: a dict is keyword arguments."""
    if isinstance(example_inputs, dict):
        return (), dict(example_inputs)
    if isinstance(example_inputs, (list, tuple)):
        return tuple(example_inputs), {}
    return (example_inputs,), {}


def build(checkout: Path, name: str, test: str, batch_size: Optional[int],
          seed: int = DEFAULT_SEED) -> BenchmarkModel:
    """A TorchBench model on the CPU, built after torch.manual_seed(seed).

    The inputs are TorchBench's own example inputs, so they are the same for every seed.
    """
    root = str(checkout)
    if root not in sys.path:
        sys.path.insert(0, root)
    module_name = f"torchbenchmark.models.{name}"
    model_module = importlib.import_module(module_name)
    torch.manual_seed(seed)
    try:
        benchmark = model_module.Model(test=test, device="cpu", batch_size=batch_size)
    except NotImplementedError as error:
        raise NotImplementedError(
            f"TorchBench model {name} does not support test={test}: {error}"
        ) from error
    module, example_inputs = benchmark.get_module()
    args, kwargs = split_inputs(example_inputs)
    used_batch_size = int(getattr(benchmark, "batch_size", None) or batch_size or 1)

    def make_inputs(seed: int) -> ModelInputs:
        return ModelInputs(_clone(args), _clone(kwargs), None)

    return BenchmarkModel(name, module, make_inputs, torchbench_loss, used_batch_size)
