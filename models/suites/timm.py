"""The timm suite: the image classifiers PyTorch's compiler dashboard tracks.

Models are built by timm with random weights (nothing downloads), dropout and stochastic
depth off, 1000 classes, at the input size of their timm configuration. Training uses
cross-entropy against seeded labels. timm is imported only in `load` (child process).
"""

from __future__ import annotations

from typing import Optional

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel
from models.reduced import ReducibleSuite
from models.specs.timm import TimmSpec

_VIT_SMALL = {"depth": 2, "embed_dim": 64, "num_heads": 2}

TIMM_MODELS: dict[str, TimmSpec] = {
    # timm 1.0 keeps adv_inception_v3 only as a deprecated alias of inception_v3 (its
    # adversarially trained weights); with random weights it is the same network.
    "adv_inception_v3": TimmSpec("inception_v3", 128, "tf_adv_in1k", reduced_image_size=75),
    "beit_base_patch16_224": TimmSpec(
        "beit_base_patch16_224", 128, reduced_kwargs={"img_size": 64, **_VIT_SMALL}
    ),
    "convnextv2_nano": TimmSpec("convnextv2_nano", 128, "fcmae_ft_in22k_in1k"),
    "deit_base_distilled_patch16_224": TimmSpec(
        "deit_base_distilled_patch16_224", 128, reduced_kwargs={"img_size": 64, **_VIT_SMALL}
    ),
    "deit_tiny_patch16_224": TimmSpec(
        "deit_tiny_patch16_224", 128, "fb_in1k", reduced_kwargs={"img_size": 64, "depth": 2}
    ),
    "dm_nfnet_f0": TimmSpec("dm_nfnet_f0", 128),
    "ghostnet_100": TimmSpec("ghostnet_100", 512),
    "inception_v3": TimmSpec("inception_v3", 128, reduced_image_size=75),
    "mobilenetv2_100": TimmSpec("mobilenetv2_100", 128),
    "mobilenetv3_large_100": TimmSpec("mobilenetv3_large_100", 512),
    "mobilevit_s": TimmSpec("mobilevit_s", 128),
    "nfnet_l0": TimmSpec("nfnet_l0", 128),
    "repvgg_a2": TimmSpec("repvgg_a2", 128),
    "swin_base_patch4_window7_224": TimmSpec(
        "swin_base_patch4_window7_224",
        128,
        reduced_kwargs={
            "img_size": 64, "window_size": 4, "embed_dim": 32,
            "depths": (1, 1, 1, 1), "num_heads": (1, 2, 4, 8),
        },
    ),
    "tf_efficientnet_b0": TimmSpec("tf_efficientnet_b0", 128),
    "visformer_small": TimmSpec("visformer_small", 128, reduced_kwargs={"img_size": 64}),
    "vit_base_patch14_dinov2": TimmSpec(
        "vit_base_patch14_dinov2", 128, "lvd142m", reduced_kwargs={"img_size": 56, **_VIT_SMALL}
    ),
    "vit_base_patch16_siglip_256": TimmSpec(
        "vit_base_patch16_siglip_256", 128, reduced_kwargs={"img_size": 64, **_VIT_SMALL}
    ),
}


class TimmSuite(ReducibleSuite):
    """timm image classifiers; `reduced=True` builds small versions (see models.reduced)."""

    name = "timm"
    order = 30
    # timm and the torchvision it imports: about 2 CPU-s a child need not repeat.
    preload = ("timm",)

    specs = TIMM_MODELS

    def load(self, model_name: str, test: str, batch_size: Optional[int],
             seed: int = DEFAULT_SEED) -> BenchmarkModel:
        self.check_model(model_name)
        from models.builders import timm as builder

        spec = TIMM_MODELS[model_name]
        return builder.build(
            model_name,
            spec,
            batch_size or self.default_batch_size(model_name),
            reduced=self.reduced,
            test=test,
            seed=seed,
        )


SUITE = TimmSuite
