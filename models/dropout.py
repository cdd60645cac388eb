"""Dropout for the verifier: the same random kernels as PyTorch's harness, nothing dropped.

The harness trains with the dropout its models are built with (it sets the Hugging Face
config's dropout floats to 1e-30, but on a config object the model was not built from; timm
models it builds with drop_rate=0 and their default stochastic depth). The timed models of
every suite keep those probabilities too. The verifier needs two training steps to agree, so
its models (`Suite.load(..., deterministic=True)`) keep every probability the harness leaves
positive at KEPT_DROPOUT: the same random draws run, and the mask keeps every element
(1 - p rounds to 1.0). That is not the same work everywhere: on CUDA, fused attention at
p = 1e-30 runs as fast as with no dropout, so the timed models do not use it.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

#: The probability of every dropout the harness leaves on (its own intended value).
KEPT_DROPOUT = 1e-30

#: Attributes of timm blocks that hold a drop probability read at run time.
_TIMM_PROBABILITIES = ("drop_prob", "drop_rate", "drop_path_rate")


def kept(probability: Optional[float]) -> Optional[float]:
    """KEPT_DROPOUT for a positive probability; zero and None unchanged."""
    if isinstance(probability, float) and probability > 0.0:
        return KEPT_DROPOUT
    return probability


def keep_dropout_kernels(module: torch.nn.Module) -> None:
    """Every positive dropout or stochastic-depth probability of `module` to KEPT_DROPOUT."""
    for sub in module.modules():
        if isinstance(sub, torch.nn.modules.dropout._DropoutNd):
            sub.p = kept(float(sub.p))
        for attribute in _TIMM_PROBABILITIES:
            value: Any = getattr(sub, attribute, None)
            if isinstance(value, float):
                setattr(sub, attribute, kept(value))
