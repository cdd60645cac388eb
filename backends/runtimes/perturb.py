"""Child side of the debug_perturb stack: eager on CPU, one result leaf perturbed."""

from __future__ import annotations

import logging
from typing import Any, Optional

import torch

from backends.runtimes.torch_device import TorchPreparedModel
from models.base import BenchmarkModel
from core.config import ExperimentConfig
from verifier.tree import find_path, get_leaf, render_path, replace_leaf

log = logging.getLogger(__name__)


def perturb_leaf(leaf: Any, scale: float, element: Optional[int] = None) -> Any:
    """`leaf` changed by a relative `scale`.

    Floating tensors get seeded noise of RMS `scale` x their RMS (so direction changes too,
    not only magnitude), or, with `element` (a flat index), only that element moves by
    `scale` of its value; integer tensors get +1 and boolean tensors a flip at their first
    element; Python numbers likewise.
    """
    if isinstance(leaf, torch.Tensor):
        if element is not None and (leaf.is_floating_point() or leaf.is_complex()):
            if element >= leaf.numel():
                raise ValueError(f"cannot perturb element {element} of a tensor of "
                                 f"{leaf.numel()} elements")
            changed = leaf.detach().clone()
            flat = changed.view(-1)
            flat[element] = flat[element] * (1 + scale)
            return changed
        if leaf.is_floating_point() or leaf.is_complex():
            generator = torch.Generator().manual_seed(0)
            noise = torch.randn(leaf.shape, generator=generator, dtype=torch.float64)
            wide = leaf.detach().to(torch.complex128 if leaf.is_complex() else torch.float64)
            size = float(wide.abs().square().mean().sqrt()) if wide.numel() else 0.0
            return (wide + scale * max(size, 1e-12) * noise).to(leaf.dtype)
        if leaf.numel() == 0:
            raise ValueError("cannot perturb an empty tensor")
        changed = leaf.detach().clone()
        flat = changed.view(-1)
        flat[0] = ~flat[0] if leaf.dtype == torch.bool else flat[0] + 1
        return changed
    if isinstance(leaf, bool):
        return not leaf
    if isinstance(leaf, int):
        return leaf + 1
    if isinstance(leaf, float):
        return leaf + scale * max(abs(leaf), 1e-12)
    raise ValueError(f"cannot perturb a leaf of type {type(leaf).__name__}")


def perturb(result: Any, path_text: str, scale: float, element: Optional[int] = None) -> Any:
    """`result` with the leaf at `path_text` perturbed (ValueError listing leaves if absent)."""
    path = find_path(result, path_text)
    log.info("debug_perturb: perturbing %s%s by %g", render_path(path),
             "" if element is None else f" at element {element}", scale)
    return replace_leaf(result, path, perturb_leaf(get_leaf(result, path), scale, element))


class PerturbingPreparedModel(TorchPreparedModel):
    """Eager on the CPU whose result for the verifier has one leaf perturbed."""

    def __init__(self, bench: BenchmarkModel, experiment: ExperimentConfig,
                 path: Optional[str], scale: float, element: Optional[int] = None) -> None:
        super().__init__(bench, experiment, torch.device("cpu"))
        self.perturb_path = path
        self.perturb_scale = scale
        self.perturb_element = element

    def result_to_host(self, result: Any) -> Any:
        host = super().result_to_host(result)
        if self.perturb_path is None:
            return host
        return perturb(host, self.perturb_path, self.perturb_scale, self.perturb_element)
