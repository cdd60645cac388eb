"""Torch modules of the faults suite (child only)."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time

import torch
from torch import nn

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, ModelInputs

log = logging.getLogger(__name__)


def _raise() -> None:
    raise RuntimeError("the raises model fails on purpose")


def _gpu_oom() -> None:
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (the gpu_oom "
                                 "model fails on purpose)")


def _segfault() -> None:
    ctypes.string_at(0)


def _exit() -> None:
    os._exit(3)


def _signal() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)


def _hang() -> None:
    grandchild = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"],
    )
    # The tests read this line from the child's log to check the grandchild is killed.
    print(f"fault-model grandchild pid {grandchild.pid}", file=sys.stderr, flush=True)
    while True:
        time.sleep(1)


def _memory_hog() -> None:
    hoard = []
    chunk = 64 * 1024 * 1024
    while True:
        hoard.append(bytearray(b"\x01") * chunk)
        time.sleep(0.01)


_FAULTS = {
    "raises": _raise,
    "segfault": _segfault,
    "exit": _exit,
    "signal": _signal,
    "hang": _hang,
    "memory_hog": _memory_hog,
    "gpu_oom": _gpu_oom,
}


class FaultModule(nn.Module):
    def __init__(self, fault) -> None:
        super().__init__()
        self.fault = fault
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.fault()
        return self.linear(x)


def build(name: str, batch_size: int, seed: int = DEFAULT_SEED) -> BenchmarkModel:
    torch.manual_seed(seed)

    def make_inputs(seed: int) -> ModelInputs:
        g = torch.Generator().manual_seed(seed)
        return ModelInputs((torch.randn(batch_size, 4, generator=g),), {})

    return BenchmarkModel(
        name, FaultModule(_FAULTS[name]), make_inputs, lambda out, _: out.sum(), batch_size
    )
