"""Small torch modules of the builtin suite (imported in the child only)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, ModelInputs


def cross_entropy_loss(output: torch.Tensor, inputs: ModelInputs) -> torch.Tensor:
    return F.cross_entropy(output.float(), inputs.targets)


class MLP(nn.Module):
    def __init__(self, features: int = 256, hidden: int = 512, classes: int = 10) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(features, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


class TransformerBlock(nn.Module):
    """Pre-norm self-attention and MLP block over token embeddings, with an LM head."""

    def __init__(self, vocab: int = 1000, dim: int = 128, heads: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm1 = nn.LayerNorm(dim)
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True, dropout=0.0)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        h = self.norm1(x)
        attended, _ = self.attention(h, h, h, need_weights=False)
        x = x + attended
        x = x + self.mlp(self.norm2(x))
        return self.head(x)


def _token_loss(output: torch.Tensor, inputs: ModelInputs) -> torch.Tensor:
    return F.cross_entropy(output.float().flatten(0, 1), inputs.targets.flatten())


def build(name: str, batch_size: int, seed: int = DEFAULT_SEED) -> BenchmarkModel:
    """Build a builtin model with seeded weights and a seeded input factory."""
    torch.manual_seed(seed)
    if name == "mlp":
        module = MLP()

        def make_inputs(seed: int) -> ModelInputs:
            g = torch.Generator().manual_seed(seed)
            return ModelInputs((torch.randn(batch_size, 256, generator=g),), {},
                               torch.randint(0, 10, (batch_size,), generator=g))

        return BenchmarkModel(name, module, make_inputs, cross_entropy_loss, batch_size)
    if name == "cnn":
        module = SmallCNN()

        def make_inputs(seed: int) -> ModelInputs:
            g = torch.Generator().manual_seed(seed)
            return ModelInputs((torch.randn(batch_size, 3, 32, 32, generator=g),), {},
                               torch.randint(0, 10, (batch_size,), generator=g))

        return BenchmarkModel(name, module, make_inputs, cross_entropy_loss, batch_size)
    if name == "transformer_block":
        module = TransformerBlock()

        def make_inputs(seed: int) -> ModelInputs:
            g = torch.Generator().manual_seed(seed)
            tokens = torch.randint(0, 1000, (batch_size, 32), generator=g)
            return ModelInputs((tokens,), {}, torch.roll(tokens, -1, dims=1))

        return BenchmarkModel(name, module, make_inputs, _token_loss, batch_size)
    raise KeyError(name)
