"""The dummy suite's model (child only; imports torch)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, ModelInputs

FEATURES = 32
HIDDEN = 512


def _nll_loss(output: torch.Tensor, inputs: ModelInputs) -> torch.Tensor:
    """Negative log-likelihood of the targets under the softmax output."""
    return F.nll_loss(torch.log(output.float().clamp_min(1e-12)), inputs.targets)


def build(batch_size: int, seed: int = DEFAULT_SEED) -> BenchmarkModel:
    torch.manual_seed(seed)
    module = nn.Sequential(
        nn.Linear(FEATURES, HIDDEN), nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
        nn.Linear(HIDDEN, FEATURES), nn.Softmax(dim=1),
    )

    def make_inputs(seed: int) -> ModelInputs:
        g = torch.Generator().manual_seed(seed)
        return ModelInputs((torch.rand(batch_size, FEATURES, generator=g),), {},
                           torch.randint(0, FEATURES, (batch_size,), generator=g))

    return BenchmarkModel("dummy", module, make_inputs, _nll_loss, batch_size)
