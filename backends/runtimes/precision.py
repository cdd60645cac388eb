"""Precision handling in the child: dtypes, casting and autocast."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import torch

if TYPE_CHECKING:
    from core.config import ExperimentConfig

_CAST_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
_AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "bfloat16": torch.bfloat16,
               "float16": torch.float16}


def parameter_dtype(precision: str) -> torch.dtype:
    """The dtype parameters and floating inputs are cast to (amp keeps fp32)."""
    return _CAST_DTYPES.get(precision, torch.float32)


def amp_dtype(precision: str, accelerator: str, override: Optional[str]) -> Optional[torch.dtype]:
    """The autocast dtype for amp: bf16 on CPU and TPU, fp16 on CUDA, unless overridden."""
    if precision != "amp":
        return None
    if override:
        return _AMP_DTYPES[override]
    return torch.float16 if accelerator == "cuda" else torch.bfloat16


def cast_floating(value: Any, device: Any, dtype: torch.dtype) -> Any:
    """Move every tensor of a nested value to `device`, casting floating ones to `dtype`."""
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            return value.to(device=device, dtype=dtype)
        return value.to(device=device)
    if isinstance(value, tuple):
        return tuple(cast_floating(v, device, dtype) for v in value)
    if isinstance(value, list):
        return [cast_floating(v, device, dtype) for v in value]
    if isinstance(value, dict):
        return {k: cast_floating(v, device, dtype) for k, v in value.items()}
    return value


def apply_numerics(experiment: "ExperimentConfig") -> None:
    """PyTorch's numerics switches for the experiment: float32 matmul precision, TF32 in
    convolutions (off only for "highest": full fp32 there too) and fp16/bf16 reductions in
    SDPA's math path."""
    precision = experiment.torch_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    torch.backends.cudnn.allow_tf32 = precision != "highest"
    torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(experiment.fp16_bf16_reduction_math_sdp)
