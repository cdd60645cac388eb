"""Builds timm models for the timm suite (imported in the child only)."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, ModelInputs
from models.specs.timm import TimmSpec

NUM_CLASSES = 1000


def disable_dropout(module: torch.nn.Module) -> None:
    """Zero every dropout and stochastic-depth probability, so train mode is deterministic."""
    for sub in module.modules():
        if isinstance(sub, torch.nn.modules.dropout._DropoutNd):
            sub.p = 0.0
        for attribute in ("drop_prob", "drop_rate", "drop_path_rate"):
            if isinstance(getattr(sub, attribute, None), float):
                setattr(sub, attribute, 0.0)


def classification_loss(output: torch.Tensor, inputs: ModelInputs) -> torch.Tensor:
    return F.cross_entropy(output.float(), inputs.targets)


def input_shape(pretrained_cfg: dict, test: str) -> tuple[int, ...]:
    """The image shape PyTorch's harness feeds: inference uses the configuration's test size
    where it has one (timm's resolve_data_config with use_test_size), training its train size."""
    if test == "eval" and pretrained_cfg.get("test_input_size"):
        return tuple(pretrained_cfg["test_input_size"])
    return tuple(pretrained_cfg["input_size"])


def build(name: str, spec: TimmSpec, batch_size: int, reduced: bool = False,
          test: str = "eval", seed: int = DEFAULT_SEED) -> BenchmarkModel:
    """A timm model with seeded random weights and a seeded image and label factory."""
    import timm

    kwargs = dict(spec.reduced_kwargs) if reduced else {}
    full_name = f"{spec.architecture}.{spec.tag}" if spec.tag else spec.architecture
    torch.manual_seed(seed)
    module = timm.create_model(
        full_name, pretrained=False, num_classes=NUM_CLASSES, drop_rate=0.0, **kwargs
    )
    disable_dropout(module)
    if reduced:
        image_size = spec.reduced_kwargs.get("img_size", spec.reduced_image_size)
        shape = (3, image_size, image_size)
    else:
        shape = input_shape(module.pretrained_cfg, test)

    def make_inputs(seed: int) -> ModelInputs:
        generator = torch.Generator().manual_seed(seed)
        images = torch.randn((batch_size, *shape), generator=generator)
        labels = torch.randint(0, NUM_CLASSES, (batch_size,), generator=generator)
        return ModelInputs((images,), {}, labels)

    return BenchmarkModel(name, module, make_inputs, classification_loss, batch_size)
