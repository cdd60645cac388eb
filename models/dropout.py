"""Dropout in training: the same random kernels as PyTorch's harness, nothing dropped.

The harness trains with the dropout its models are built with: it sets the Hugging Face
config's dropout floats to 1e-30 only after the model is built, so the modules keep their
defaults (BertForMaskedLM: 37 dropout modules at 0.1), and it builds timm models with
drop_rate=0 and their default stochastic depth. A dropout at p > 0 runs a random kernel and a
mask in every training iteration (on CUDA, PyTorch skips both at p == 0), so turning it off
does less work than the harness. Ours keeps every probability the harness leaves positive,
but at KEPT_DROPOUT: the same kernels run, and the mask keeps every element (1 - p rounds to
1.0), so a training step stays deterministic for the verifier.
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
