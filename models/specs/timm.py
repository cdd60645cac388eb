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

#: Inductor settings PyTorch's harness compiles a model with (its timm_models.yaml's
#: emulate_precision_casts list, set by its load_model in every mode): kept with the model so
#: that an inductor experiment compiles it as the dashboard does.
HARNESS_INDUCTOR_SETTINGS = {
    "vit_base_patch14_dinov2": {"emulate_precision_casts": True},
}
