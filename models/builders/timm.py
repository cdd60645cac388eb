"""Builds timm models for the timm suite (imported in the child only)."""

from __future__ import annotations

import torch

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, ModelInputs, eager_as_the_harness
from models.specs.timm import HARNESS_INDUCTOR_SETTINGS, HARNESS_SGD_MODELS, TimmSpec



@eager_as_the_harness
def output_mean_loss(output, inputs: ModelInputs) -> torch.Tensor:
    """the mean of the output, as PyTorch's harness trains timm models (no labels)

    Its reduce_to_scalar_loss; a tuple's first element."""
    if isinstance(output, (tuple, list)):
        output = output[0]
    return output.sum() / output.numel()


def input_shape(module: torch.nn.Module, test: str) -> tuple[int, ...]:
    """The image shape PyTorch's harness feeds: timm's resolve_data_config, with the
    configuration's test size in inference (use_test_size) and its train size in training."""
    from timm.data import resolve_data_config

    return tuple(resolve_data_config({}, model=module, use_test_size=test == "eval")["input_size"])


def build(name: str, spec: TimmSpec, batch_size: int, reduced: bool = False,
          test: str = "eval", seed: int = DEFAULT_SEED) -> BenchmarkModel:
    """A timm model with seeded random weights and a seeded image factory, built as PyTorch's
    harness builds it: the configuration's own classes (a features-only configuration keeps
    no head), drop_rate 0, the default stochastic depth (models/dropout.py)."""
    import timm

    kwargs = dict(spec.reduced_kwargs) if reduced else {}
    full_name = f"{spec.architecture}.{spec.tag}" if spec.tag else spec.architecture
    torch.manual_seed(seed)
    module = timm.create_model(
        full_name, pretrained=False, in_chans=3, scriptable=False, drop_rate=0.0, **kwargs
    )
    if reduced:
        image_size = spec.reduced_kwargs.get("img_size", spec.reduced_image_size)
        shape = (3, image_size, image_size)
    else:
        shape = input_shape(module, test)

    def make_inputs(seed: int) -> ModelInputs:
        generator = torch.Generator().manual_seed(seed)
        images = torch.randn((batch_size, *shape), generator=generator, device="cpu")
        return ModelInputs((images,), {}, None)

    return BenchmarkModel(name, module, make_inputs, output_mean_loss, batch_size,
                          harness_optimizer="sgd" if name in HARNESS_SGD_MODELS else "adam",
                          inductor_settings=dict(HARNESS_INDUCTOR_SETTINGS.get(name, {})))
