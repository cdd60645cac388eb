"""Judge one leaf of a result as PyTorch's harness does (`torch._dynamo.utils.same`).

For a tensor (or a Python float) the harness's decision procedure is, in order:

1. dtypes must be equal (`exact_dtype`);
2. booleans: equal as uint8 within tol (or, for listed models, an IoU at a threshold);
3. cosine mode: allclose at tol (NaN equal) passes, else cosine similarity >= 0.99;
4. allclose against eager at atol = rtol = tol (NaN equal where `equal_nan`) passes;
5. with a float64 reference: RMSE(experiment, fp64) <= multiplier x RMSE(eager, fp64)
   + tol / 10, the multiplier 2, 3 for fp16/bf16 results, small tensors, 1x1 kernels
   and tol >= 2e-2, or 10 and 8 for listed models' tensors of at most 10 and 500
   elements; two NaN errors pass where `equal_nan`; an experiment without NaN that is
   close to fp64 passes where only eager has NaN;
6. otherwise it fails.

Python ints, bools, strings, None and devices must be equal (==). The runner adds one
rule of its own: shapes must be equal (allclose would broadcast them). Each check keeps
its numbers (the errors, the allowed error, the largest difference) for the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from verifier.tolerance import Tolerance
from verifier.tree import Path

COSINE_THRESHOLD = 0.99
COSINE_EPS = 1e-6
# The harness lets an experiment without NaN pass where only eager has NaN, when it is
# allclose to the fp64 reference at this tolerance.
NAN_IN_EAGER_ONLY_TOL = 4e-2
BASE_MULTIPLIER = 2.0
REDUCED_MULTIPLIER = 3.0
REDUCED_DTYPES = (torch.float16, torch.bfloat16)
# (largest numel, multiplier) for models listed for larger multipliers on small tensors.
LARGER_MULTIPLIERS = ((10, 10.0), (500, 8.0))
# Tensors with fewer elements are noisy: multiplier 3 whatever their dtype.
SMALL_NUMEL = 1000
# A tol at least this large marks a model listed for a higher tolerance: multiplier 3.
HIGH_TOL = 2e-2


@dataclass
class LeafCheck:
    """The outcome for one leaf: a failure message or None, and its numbers."""

    path: Path
    failure: Optional[str] = None
    numbers: dict[str, Any] = field(default_factory=dict)
    # How close the leaf came to its threshold (1 at the threshold); 0 for equal leaves.
    ratio: float = 0.0
    # What the messages call the two sides.
    names: tuple[str, str] = ("eager", "experiment")

    @property
    def ref(self) -> str:
        return self.names[0]

    def returned(self, actual: Any, expected: Any) -> str:
        return (f"{self.names[1]} returned {short(actual)} where {self.ref} returned "
                f"{short(expected)}")


def judge_leaf(path: Path, expected: Any, actual: Any, reference: Any,
               tolerance: Tolerance, tol: float, cosine: bool,
               names: tuple[str, str] = ("eager", "experiment")) -> LeafCheck:
    """The harness's verdict on one leaf, with its reason and numbers.

    `reference` is the fp64 leaf, or None where there is none (eager stands in for it, as
    in the harness); `tol` is the tolerance's tol, or its determinism tol between eager runs.
    `names`: what messages call the expected and the actual side.
    """
    check = LeafCheck(path, names=names)
    if isinstance(expected, (torch.Tensor, float)) or _is_numpy_array(expected):
        if _is_numpy_array(expected) and type(expected) is not type(actual):
            check.failure = check.returned(actual, expected)
            return check
        _tensor_leaf(check, expected, actual, reference, tolerance, tol, cosine)
    elif not _plain_equal(expected, actual):
        check.failure = check.returned(actual, expected)
    return check


# ---------------------------------------------------------------------------------------
# Conversions


def _is_numpy_array(value: Any) -> bool:
    return type(value).__module__ == "numpy" and type(value).__name__ == "ndarray"


def _to_tensor(value: Any) -> Optional[torch.Tensor]:
    """A dense CPU tensor of a tensor, number or numpy array (a Python float becomes torch's
    default dtype, as `torch.tensor` makes it), else None."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach()
    elif isinstance(value, (bool, int, float, complex)) or _is_numpy_array(value):
        try:
            tensor = torch.as_tensor(value) if _is_numpy_array(value) else torch.tensor(value)
        except (TypeError, ValueError, RuntimeError, OverflowError):
            return None
    else:
        return None
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    if tensor.layout != torch.strided:
        tensor = tensor.to_dense()
    return tensor


def _fp64(reference: Any) -> Optional[torch.Tensor]:
    """The fp64 leaf as the harness holds it: floating tensors in float64."""
    tensor = _to_tensor(reference)
    if tensor is not None and isinstance(reference, torch.Tensor) and tensor.is_floating_point():
        tensor = tensor.to(torch.float64)
    return tensor


def _dtype_name(tensor: torch.Tensor) -> str:
    return str(tensor.dtype).replace("torch.", "")


def _real(tensor: torch.Tensor) -> torch.Tensor:
    """float64 values (complex as pairs of reals), for the numbers and the errors."""
    if tensor.is_complex():
        return torch.view_as_real(tensor.to(torch.complex128))
    return tensor.to(torch.float64)


def _json(value: float) -> Any:
    return value if math.isfinite(value) else str(value)


# ---------------------------------------------------------------------------------------
# Tensors


def _tensor_leaf(check: LeafCheck, expected: Any, actual: Any, reference: Any,
                 tolerance: Tolerance, tol: float, cosine: bool) -> None:
    e, a = _to_tensor(expected), _to_tensor(actual)
    if a is None:
        check.failure = check.returned(actual, expected)
        return
    r = _fp64(reference) if reference is not None else None
    if r is None or r.shape != e.shape:
        r = e
    if tuple(e.shape) != tuple(a.shape):
        check.failure = f"shape {tuple(a.shape)} differs from {check.ref}'s {tuple(e.shape)}"
        return
    if e.dtype != a.dtype:
        check.failure = (f"dtype {_dtype_name(a)} differs from {check.ref}'s {_dtype_name(e)} "
                         f"(dtypes must be equal)")
        return
    check.numbers["tol"] = tol
    if e.dtype == torch.bool:
        _bool_leaf(check, e, a, tolerance, tol)
    elif cosine:
        _cosine_leaf(check, e, a, tol)
    else:
        _allclose_then_fp64(check, e, a, r, tolerance, tol, reference is not None)


def _differences(e: torch.Tensor, a: torch.Tensor, tol: float) -> tuple[float, float, list[int]]:
    """Largest |a - e| over finite positions, how far it is along allclose's bound
    (tol + tol |a|) at its worst, and the worst position."""
    fe, fa = _real(e), _real(a)
    finite = torch.isfinite(fe) & torch.isfinite(fa)
    if not bool(finite.any()):
        return 0.0, 0.0, []
    diff = torch.where(finite, (fa - fe).abs(), torch.zeros_like(fa))
    bound = tol + tol * fa.abs()
    ratios = torch.where(finite, diff / bound if tol > 0 else diff * math.inf, torch.zeros_like(fa))
    ratios = torch.nan_to_num(ratios, nan=0.0)
    worst = int(ratios.flatten().argmax()) if ratios.numel() else 0
    where = [int(i) for i in torch.unravel_index(torch.tensor(worst), fa.shape)] if fa.dim() else []
    return float(diff.max()), float(ratios.max()), where


def _value_at(tensor: torch.Tensor, where: list[int]) -> Any:
    value = tensor[tuple(where)] if where else tensor
    if tensor.is_complex():
        return complex(value.item())
    return value.item()


def _not_close_text(check: LeafCheck, e: torch.Tensor, a: torch.Tensor, tol: float,
                    equal_nan: bool) -> str:
    largest, _, where = _differences(e, a, tol)
    nan_note = _nan_note(check, e, a, equal_nan)
    if largest == 0 or (not where and e.dim()):
        return f"not allclose to {check.ref} at tol {tol:g}{nan_note}"
    return (f"not allclose to {check.ref} at tol {tol:g} (largest difference {largest:.3e}, at "
            f"{where}: {_value_at(a, where)!r} vs {_value_at(e, where)!r}){nan_note}")


def _nan_note(check: LeafCheck, e: torch.Tensor, a: torch.Tensor, equal_nan: bool) -> str:
    """Where NaN and infinities are, when either side has any."""
    if not (e.is_floating_point() or e.is_complex()):
        return ""
    notes = []
    for name, mask in (("NaN", torch.isnan), ("infinities", torch.isinf)):
        ne, na = int(mask(e).sum()), int(mask(a).sum())
        if ne or na:
            same_places = bool(torch.equal(mask(e), mask(a)))
            notes.append(f"{name} at {na} positions, {check.ref}'s at {ne}"
                         + (" (the same places)" if same_places else "")
                         + (", and NaN never equals NaN in fp32 (equal_nan off)"
                            if name == "NaN" and na and ne and not equal_nan else ""))
    return "; " + "; ".join(notes) if notes else ""


def _bool_leaf(check: LeafCheck, e: torch.Tensor, a: torch.Tensor, tolerance: Tolerance,
               tol: float) -> None:
    check.numbers["check"] = "equal booleans"
    if tolerance.iou_threshold is not None:
        check.numbers["check"] = "IoU of boolean masks"
        intersection, union = int((e & a).sum()), int((e | a).sum())
        iou = 1.0 if union == 0 else intersection / union
        check.numbers["iou"] = iou
        threshold = tolerance.iou_threshold
        check.ratio = (1 - iou) / (1 - threshold) if threshold < 1 else 0.0
        if union and iou < tolerance.iou_threshold:
            check.failure = (f"IoU of the boolean mask with {check.ref}'s {iou:.4f} is below "
                             f"{tolerance.iou_threshold:g}")
        return
    if torch.allclose(e.to(torch.uint8), a.to(torch.uint8), atol=tol, rtol=tol,
                      equal_nan=tolerance.equal_nan):
        return
    differs = e != a
    first = [int(i) for i in differs.nonzero()[0]] if differs.dim() else []
    check.ratio = math.inf
    check.failure = (f"boolean values differ from {check.ref}'s at {int(differs.sum())} of "
                     f"{differs.numel()} positions (first at {first}: {_value_at(a, first)!r} "
                     f"vs {_value_at(e, first)!r})")


def _cosine_leaf(check: LeafCheck, e: torch.Tensor, a: torch.Tensor, tol: float) -> None:
    check.numbers["check"] = "cosine"
    largest, close_ratio, _ = _differences(e, a, tol)
    check.numbers["max_abs_diff_vs_eager"] = _json(largest)
    flat_e, flat_a = _float32_flat(e), _float32_flat(a)
    if torch.allclose(flat_e, flat_a, atol=tol, rtol=tol, equal_nan=True):
        check.ratio = close_ratio
        return
    score = float(torch.nn.functional.cosine_similarity(flat_e, flat_a, dim=0, eps=COSINE_EPS))
    check.numbers["cosine"] = _json(score)
    # Cosine ignores scale; the relative error says what it leaves out (not judged).
    fe, fa = _real(e), _real(a)
    finite = torch.isfinite(fe) & torch.isfinite(fa)
    scale = _rms(fe[finite])
    if scale > 0:
        check.numbers["relative_error_vs_eager"] = _json(_rms((fa - fe)[finite]) / scale)
    check.ratio = (1 - score) / (1 - COSINE_THRESHOLD) if not math.isnan(score) else math.inf
    if not score >= COSINE_THRESHOLD:
        check.failure = (f"cosine similarity to {check.ref} {score:.5f} is below "
                         f"{COSINE_THRESHOLD} (not allclose at tol {tol:g} either)")


def _float32_flat(tensor: torch.Tensor) -> torch.Tensor:
    flat = tensor.flatten()
    if flat.is_complex():
        flat = flat.real
    return flat.to(torch.float32)


def _rms(x: torch.Tensor) -> float:
    return float(torch.sqrt(torch.mean(x * x))) if x.numel() else 0.0


def _rmse(reference: torch.Tensor, x: torch.Tensor) -> float:
    """Root mean squared error, NaN and infinities included (as the harness computes it)."""
    if x.is_complex() or reference.is_complex():
        reference, x = _real(reference), _real(x)
    return float(torch.sqrt(torch.mean(torch.square(reference - x))))


def multiplier_for(e: torch.Tensor, a: torch.Tensor, r: torch.Tensor, tol: float,
                   larger_for_smaller: bool) -> float:
    """How many times eager's RMSE against fp64 the experiment's may be (`same()`'s rule)."""
    numel = r.numel()
    if larger_for_smaller:
        for largest, multiplier in LARGER_MULTIPLIERS:
            if numel <= largest:
                return multiplier
    if (numel < SMALL_NUMEL or (e.dim() == 4 and e.shape[-1] == e.shape[-2] == 1)
            or tol >= HIGH_TOL):
        return REDUCED_MULTIPLIER
    return REDUCED_MULTIPLIER if a.dtype in REDUCED_DTYPES else BASE_MULTIPLIER


def _allclose_then_fp64(check: LeafCheck, e: torch.Tensor, a: torch.Tensor, r: torch.Tensor,
                        tolerance: Tolerance, tol: float, reference_given: bool) -> None:
    largest, close_ratio, _ = _differences(e, a, tol)
    check.numbers["check"] = "allclose"
    check.numbers["max_abs_diff_vs_eager"] = _json(largest)
    if torch.allclose(e, a, atol=tol, rtol=tol, equal_nan=tolerance.equal_nan):
        check.ratio = close_ratio
        return
    not_close = _not_close_text(check, e, a, tol, tolerance.equal_nan)
    if r.dtype != torch.float64:
        check.ratio = math.inf
        check.failure = not_close if r is e else (
            f"{not_close}, and its fp64 reference is {_dtype_name(r)}, not float64")
        if r is e and reference_given:
            check.failure += ", and there is no float64 reference to judge it by"
        return
    check.numbers["check"] = "fp64"
    if (e.is_floating_point() and bool(torch.isnan(e).any()) and not bool(torch.isnan(r).any())
            and not bool(torch.isnan(a).any())
            and torch.allclose(r.to(a.dtype), a, atol=NAN_IN_EAGER_ONLY_TOL,
                               rtol=NAN_IN_EAGER_ONLY_TOL, equal_nan=tolerance.equal_nan)):
        check.numbers["check"] = "fp64 (NaN in eager only)"
        return
    eager_error, error = _rmse(r, e), _rmse(r, a)
    multiplier = multiplier_for(e, a, r, tol, tolerance.larger_multiplier_for_smaller_tensor)
    allowed = multiplier * eager_error + tol / 10.0
    scale = _rms(r[torch.isfinite(r)]) if r.numel() else 0.0
    check.numbers.update(error=_json(error), eager_error=_json(eager_error),
                         multiplier=multiplier, allowed=_json(allowed))
    if scale > 0 and math.isfinite(error):
        check.numbers["relative_error"] = error / scale
    if error <= allowed:
        check.ratio = error / allowed if allowed > 0 else 0.0
        return
    if tolerance.equal_nan and math.isnan(eager_error) and math.isnan(error):
        check.numbers["check"] = "fp64 (NaN in both, equal_nan)"
        return
    check.ratio = math.inf if not math.isfinite(error) else (
        error / allowed if allowed > 0 else math.inf)
    if math.isfinite(error) and math.isfinite(allowed):
        check.failure = (f"RMSE against fp64 {error:.3e} exceeds {multiplier:g} x {check.ref}'s "
                         f"{eager_error:.3e} + tol/10 {tol / 10:.1e} = {allowed:.3e} ({not_close})")
        return
    check.failure = (f"{not_close}; RMSE against fp64 {error:.3e}, {check.ref}'s "
                     f"{eager_error:.3e}: not finite, so the fp64 rule fails")


# ---------------------------------------------------------------------------------------
# Other leaves


def _plain_equal(expected: Any, actual: Any) -> bool:
    """== for Python scalars, strings, None and devices, as the harness compares them; a
    numpy scalar must also have eager's type; other objects compare by == where it gives
    a truth value."""
    if type(expected).__module__ == "numpy":
        if type(expected) is not type(actual):
            return False
    elif expected is None or actual is None:
        return expected is actual
    try:
        return bool(expected == actual)
    except Exception:  # objects whose == is not a truth value
        return False


def short(value: Any, limit: int = 80) -> str:
    """A short description of a value for messages."""
    text = repr(value) if not isinstance(value, torch.Tensor) else (
        f"Tensor[{_dtype_name(value)}, {tuple(value.shape)}]")
    return text if len(text) <= limit else text[: limit - 3] + "..."
