"""The bound suite's models (child only; imports torch). See models/suites/bound.py."""

from __future__ import annotations

import time

import torch
from torch import nn

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, ModelInputs

SLEEP_SECONDS = 0.002
TINY_OPERATIONS = 400
WIDTH = 64


class HostSleep(nn.Module):
    """A small product, then the host sleeps: the device waits for it."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        time.sleep(SLEEP_SECONDS)
        return self.linear(y)


class TinyKernels(nn.Module):
    """Hundreds of elementwise operations on a small tensor: one short kernel each."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(TINY_OPERATIONS):
            x = x * 1.0001 + 0.0001
        return x


class BigMatmul(nn.Module):
    """Products of two large square matrices: the device's work dwarfs the host's."""

    def __init__(self, side: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(side, side) / side ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.weight) @ self.weight


def _sum_loss(output: torch.Tensor, inputs: ModelInputs) -> torch.Tensor:
    return output.float().mean()


def build(name: str, batch_size: int, seed: int = DEFAULT_SEED) -> BenchmarkModel:
    torch.manual_seed(seed)
    if name == "big_matmul":
        module: nn.Module = BigMatmul(batch_size)
        shape = (batch_size, batch_size)
    else:
        module = HostSleep() if name == "host_sleep" else TinyKernels()
        shape = (batch_size, WIDTH)

    def make_inputs(seed: int) -> ModelInputs:
        g = torch.Generator().manual_seed(seed)
        return ModelInputs((torch.rand(*shape, generator=g),), {})

    return BenchmarkModel(name, module, make_inputs, _sum_loss, batch_size)
