"""Dropout for the verifier: the same random kernels as PyTorch's harness, nothing dropped.

The harness trains with the dropout its models are built with (it sets the Hugging Face
config's dropout floats to 1e-30, but on a config object the model was not built from; timm
models it builds with drop_rate=0 and their default stochastic depth), and so do the suites'
models. The verifier needs two training steps to agree, so it passes the model it loads
through `keep_dropout_kernels`: every probability the harness leaves positive goes to
KEPT_DROPOUT, the same random draws run, and the mask keeps every element (1 - p rounds to
1.0). That is not the same work everywhere: on CUDA, fused attention at p = 1e-30 runs as
fast as with no dropout, so the timed models keep their own probabilities.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

#: The probability of every dropout the harness leaves on (its own intended value).
KEPT_DROPOUT = 1e-30

#: What the name of an attribute holding a drop probability contains: timm's drop_prob,
#: drop_rate and drop_path_rate; transformers' dropout, attention_dropout, attn_pdrop (in
#: modules and in their config, which some read at run time).
_PROBABILITY_MARKER = "drop"


def kept(probability: Optional[float]) -> Optional[float]:
    """KEPT_DROPOUT for a positive probability; zero and None unchanged."""
    if isinstance(probability, float) and probability > 0.0:
        return KEPT_DROPOUT
    return probability


def keep_dropout_kernels(module: torch.nn.Module) -> None:
    """Every positive dropout or stochastic-depth probability of `module` to KEPT_DROPOUT: its
    dropout layers', and every float attribute named for one, of its submodules and of the
    configs they hold."""
    holders: dict[int, Any] = {}
    for sub in module.modules():
        if isinstance(sub, torch.nn.modules.dropout._DropoutNd):
            sub.p = kept(float(sub.p))
        holders[id(sub)] = sub
        config = getattr(sub, "config", None)
        if hasattr(config, "__dict__"):
            holders[id(config)] = config
    for holder in holders.values():
        for attribute, value in list(vars(holder).items()):
            if _PROBABILITY_MARKER in attribute and isinstance(value, float):
                setattr(holder, attribute, kept(value))
