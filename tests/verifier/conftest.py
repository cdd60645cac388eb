"""Small real models and run factories for the verifier's tests."""

from __future__ import annotations

import collections
import copy
import dataclasses
from typing import Any, Callable

import pytest
import torch
from torch import nn

Pair = collections.namedtuple("Pair", ["first", "second"])


@dataclasses.dataclass
class Extras:
    ids: torch.Tensor
    flags: torch.Tensor
    note: str


class ManyOutputs(nn.Module):
    """A model returning a nested result: tuple, dict, namedtuple, dataclass, int and bool leaves."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 16))
        self.side = nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> Any:
        logits = self.layers(x)
        side = self.side(x)
        return (
            logits,
            side,
            {"deep": {"scores": logits.softmax(-1), "pair": Pair(side.sum(), side.mean(0))}},
            Extras(ids=logits.argmax(-1), flags=side > 0, note="ok"),
            x.shape[0],
        )


class MLP(nn.Module):
    def __init__(self, features: int = 32, hidden: int = 64, classes: int = 8) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(features, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def build(factory: Callable[[], nn.Module], seed: int = 0) -> nn.Module:
    """A fresh model with weights from `seed`, leaving the global RNG where it was."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return factory()


def inputs(seed: int = 1, batch: int = 4, features: int = 32) -> torch.Tensor:
    return torch.randn(batch, features, generator=torch.Generator().manual_seed(seed))


def to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(to_cpu(v) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(v) for v in value)
    if isinstance(value, dict):
        converted = copy.copy(value)  # keeps OrderedDict and ModelOutput classes
        for key, item in value.items():
            converted[key] = to_cpu(item)
        return converted
    if dataclasses.is_dataclass(value):
        return dataclasses.replace(value, **{f.name: to_cpu(getattr(value, f.name))
                                             for f in dataclasses.fields(value)})
    return value


def eval_run(factory: Callable[[], nn.Module], dtype: torch.dtype = torch.float32,
             x: torch.Tensor | None = None) -> Callable[[], Any]:
    """A callable that builds a fresh model in `dtype` and returns its eval result on CPU."""
    x = inputs() if x is None else x

    def run() -> Any:
        model = build(factory).to(dtype).eval()
        with torch.no_grad():
            return to_cpu(model(x.to(dtype)))

    return run


def train_run(factory: Callable[[], nn.Module], dtype: torch.dtype = torch.float32,
              hook: Callable[[nn.Module], None] | None = None,
              halves: bool = False) -> Callable[[], Any]:
    """A callable returning {"loss", "gradients"} of one training step of a fresh model.

    With `halves`, the batch runs as two halves whose gradients add up (other rounding).
    """
    x = inputs()
    targets = torch.randint(0, 8, (x.shape[0],), generator=torch.Generator().manual_seed(2))

    def run() -> Any:
        model = build(factory).to(dtype).train()
        if hook:
            hook(model)
        if halves:
            loss = 0
            for xs, ts in zip(x.chunk(2), targets.chunk(2)):
                part = nn.functional.cross_entropy(model(xs.to(dtype)).float(), ts) / 2
                part.backward()
                loss = loss + part.detach()
        else:
            loss = nn.functional.cross_entropy(model(x.to(dtype)).float(), targets)
            loss.backward()
        return {"loss": loss.detach(),
                "gradients": {n: p.grad.detach().clone() for n, p in model.named_parameters()}}

    return run


@pytest.fixture
def many_outputs_runs():
    """(fp64 reference, eager, eager again) results of ManyOutputs."""
    return (eval_run(ManyOutputs, torch.float64)(), eval_run(ManyOutputs)(),
            eval_run(ManyOutputs)())
