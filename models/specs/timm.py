"""The timm suite's spec dataclass, shared by models.suites.timm and models.builders.timm."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TimmSpec:
    """One model: timm architecture, dashboard batch size and its reduced form."""

    architecture: str
    batch_size: int
    # The pretrained tag only chooses timm's default input size (weights stay random).
    tag: str = ""
    reduced_kwargs: dict[str, Any] = field(default_factory=dict)
    reduced_image_size: int = 64


#: The models PyTorch's harness trains with SGD rather than Adam (BENCHMARK_USE_SGD).
HARNESS_SGD_MODELS = frozenset({"adv_inception_v3", "ghostnet_100", "tf_efficientnet_b0"})
