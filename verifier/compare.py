"""Compare an experiment's result with eager's, leaf by leaf.

With an fp64 eager reference, a floating leaf passes when
    err(experiment, fp64) <= multiplier * err(eager, fp64) + tol,
where err is the RMSE over the finite positions divided by the reference's RMS (at least
`floor`). Without one, it passes when its cosine similarity to eager is at least
`cosine` and its relative error against eager at most `fallback` (small tensors: an
elementwise allclose at `fallback`). In both, NaN and infinities must sit at the same
places with the same values as eager's; integer and boolean leaves, Python numbers among
them, must equal eager's exactly; shapes and dtype kinds must match; other leaves
(None, strings) must be equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import torch

from core.schema import Verdict, VerificationCode
from verifier.tolerance import Tolerance, tolerance_for
from verifier.tree import Path, StructureMismatch, render_path, zip_leaves

__all__ = ["Tolerance", "tolerance_for", "compare", "compare_cosine", "eager_mismatch"]


@dataclass
class LeafCheck:
    """The outcome for one leaf: a failure message or None, and its numbers."""

    path: Path
    failure: Optional[str] = None
    numbers: dict[str, Any] = field(default_factory=dict)
    # How close the leaf came to its threshold (error / allowed); 0 for exact leaves.
    ratio: float = 0.0


def compare(
    reference_fp64: Any, expected_eager: Any, actual: Any, tolerance: Tolerance
) -> Verdict:
    """PASS or FAIL of `actual` against eager, judged by the fp64 reference.

    A reference that is None, or whose structure differs from eager's, is not used: cosine
    similarity decides then (details["fp64"] says why).
    """
    if reference_fp64 is None:
        return compare_cosine(expected_eager, actual, tolerance).with_details(
            fp64="no fp64 reference")
    try:
        references = dict((p, r) for p, _, r in
                          zip_leaves(expected_eager, reference_fp64, ("eager", "fp64 reference")))
    except StructureMismatch as exc:
        return compare_cosine(expected_eager, actual, tolerance).with_details(
            fp64=f"fp64 reference unusable: {exc}")
    try:
        pairs = zip_leaves(expected_eager, actual)
    except StructureMismatch as exc:
        return _structure_failure(exc, "fp64")
    tolerance = with_result_scale_floor(tolerance, references.values())
    checks = [_check_leaf(p, e, a, tolerance, references.get(p), ref_given=True)
              for p, e, a in pairs]
    return _verdict(checks, "fp64")


RESULT_SCALE_FRACTION = 1e-3


def with_result_scale_floor(tolerance: Tolerance, references: Any) -> Tolerance:
    """Raise the floor to a fraction of the largest reference leaf's RMS.

    A leaf that is zero in fp64 but not in fp32 (the gradient of a convolution's bias just
    before a batch norm, say) holds only rounding noise; judged relative to its own size it
    would fail every stack, eager included. Relative to the result's scale it is compared
    like its neighbours.
    """
    scales = [_rms(r.double()) for r in references
              if isinstance(r, torch.Tensor) and r.is_floating_point() and r.numel()
              and bool(torch.isfinite(r).all())]
    if not scales:
        return tolerance
    return replace(tolerance, floor=max(tolerance.floor, RESULT_SCALE_FRACTION * max(scales)))


def compare_cosine(expected: Any, actual: Any, tolerance: Tolerance) -> Verdict:
    """PASS or FAIL of `actual` against eager without an fp64 reference (every leaf)."""
    try:
        pairs = zip_leaves(expected, actual)
    except StructureMismatch as exc:
        return _structure_failure(exc, "cosine")
    checks = [_check_leaf(p, e, a, tolerance, None, ref_given=False) for p, e, a in pairs]
    return _verdict(checks, "cosine")


def eager_mismatch(first: Any, second: Any, tolerance: Tolerance) -> Optional[str]:
    """Where and how two eager runs from the same seed differ, or None when they agree.

    Floating leaves may differ by `tolerance.determinism` (relative RMSE); everything else
    must be equal, NaN at the same places.
    """
    try:
        pairs = zip_leaves(first, second, ("the first eager run", "the second eager run"))
    except StructureMismatch as exc:
        return str(exc)
    for path, a, b in pairs:
        message = _determinism_failure(a, b, tolerance)
        if message:
            return f"{render_path(path)}: {message}"
    return None


# ---------------------------------------------------------------------------------------
# Leaves


def _as_tensor(value: Any) -> Optional[torch.Tensor]:
    """A CPU tensor for numeric leaves (tensors, Python and numpy numbers), else None."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        if tensor.layout != torch.strided:
            tensor = tensor.to_dense()
        return tensor
    if isinstance(value, bool):
        return torch.tensor(value)
    if isinstance(value, int):
        try:
            return torch.tensor(value, dtype=torch.int64)
        except (OverflowError, RuntimeError):
            return None
    if isinstance(value, float):
        return torch.tensor(value, dtype=torch.float64)
    if isinstance(value, complex):
        return torch.tensor(value, dtype=torch.complex128)
    if hasattr(value, "__array__") and hasattr(value, "dtype") and not isinstance(value, str):
        try:
            import numpy

            return torch.as_tensor(numpy.asarray(value))
        except (TypeError, ValueError, RuntimeError):
            return None
    return None


def _dtype_kind(tensor: torch.Tensor) -> str:
    if tensor.dtype == torch.bool:
        return "bool"
    if tensor.is_complex():
        return "complex"
    if tensor.is_floating_point():
        return "floating"
    return "integer"


def _real_float64(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.is_complex():
        return torch.view_as_real(tensor.to(torch.complex128))
    return tensor.to(torch.float64)


def _form_failure(expected: torch.Tensor, actual: torch.Tensor, other: str = "eager") -> Optional[str]:
    if tuple(expected.shape) != tuple(actual.shape):
        return f"shape {tuple(actual.shape)} differs from {other}'s {tuple(expected.shape)}"
    if _dtype_kind(expected) != _dtype_kind(actual):
        return (f"dtype {str(actual.dtype).replace('torch.', '')} is {_dtype_kind(actual)}, "
                f"{other}'s {str(expected.dtype).replace('torch.', '')} is {_dtype_kind(expected)}")
    return None


def _exact_failure(expected: torch.Tensor, actual: torch.Tensor, what: str = "eager") -> Optional[str]:
    differs = expected != actual
    count = int(differs.sum())
    if count == 0:
        return None
    first = tuple(int(i) for i in differs.nonzero()[0]) if differs.dim() else ()
    return (f"{_dtype_kind(actual)} values differ from {what}'s at {count} of "
            f"{differs.numel()} positions (first at {list(first)}: "
            f"{actual[first].item()!r} vs {expected[first].item()!r})")


def _nonfinite_failure(expected: torch.Tensor, actual: torch.Tensor, what: str = "eager") -> Optional[str]:
    """NaN and infinities must be at the same places, with the same sign, as in `expected`."""
    e, a = _real_float64(expected), _real_float64(actual)
    for name, mask in (("NaN", torch.isnan), ("+inf", torch.isposinf), ("-inf", torch.isneginf)):
        me, ma = mask(e), mask(a)
        if not torch.equal(me, ma):
            extra, missing = int((ma & ~me).sum()), int((me & ~ma).sum())
            return (f"{name} at {extra} positions where {what} has none and missing at "
                    f"{missing} positions where {what} has it")
    return None


def _rms(x: torch.Tensor) -> float:
    return float(torch.sqrt(torch.mean(x * x))) if x.numel() else 0.0


def _relative_error(x: torch.Tensor, reference: torch.Tensor, floor: float) -> float:
    """RMSE of x against reference, divided by the reference's RMS (at least `floor`)."""
    if x.numel() == 0:
        return 0.0
    return _rms(x - reference) / max(_rms(reference), floor)


def _cosine(x: torch.Tensor, y: torch.Tensor) -> float:
    nx, ny = float(torch.linalg.vector_norm(x)), float(torch.linalg.vector_norm(y))
    if nx == 0.0 and ny == 0.0:
        return 1.0
    if nx == 0.0 or ny == 0.0:
        return 0.0
    return float(torch.sum(x * y)) / (nx * ny)


def _json_float(value: float) -> Any:
    return value if math.isfinite(value) else str(value)


def _check_leaf(
    path: Path,
    expected: Any,
    actual: Any,
    tolerance: Tolerance,
    reference: Any,
    ref_given: bool,
) -> LeafCheck:
    check = LeafCheck(path)
    e, a = _as_tensor(expected), _as_tensor(actual)
    if e is None or a is None:
        if (e is None) != (a is None) or not _plain_equal(expected, actual):
            check.failure = (f"experiment returned {_short(actual)} where eager returned "
                             f"{_short(expected)}")
        return check
    form = _form_failure(e, a)
    if form:
        check.failure = form
        return check
    if _dtype_kind(e) in ("bool", "integer"):
        check.failure = _exact_failure(e, a)
        return check
    check.failure = _nonfinite_failure(e, a)
    if check.failure:
        return check
    r = _as_tensor(reference) if ref_given and reference is not None else None
    if r is not None and (r.shape != e.shape or _dtype_kind(r) not in ("floating", "complex")):
        r = None
    if r is None:
        _cosine_check(check, e, a, tolerance)
        if ref_given:
            check.numbers["leaf_method"] = "cosine (no usable fp64 leaf)"
        return check
    _fp64_check(check, e, a, r, tolerance)
    return check


def _finite(*tensors: torch.Tensor) -> torch.Tensor:
    mask = torch.ones(tensors[0].shape, dtype=torch.bool)
    for t in tensors:
        mask &= torch.isfinite(t)
    return mask


def _fp64_check(check: LeafCheck, e: torch.Tensor, a: torch.Tensor, r: torch.Tensor,
                tolerance: Tolerance) -> None:
    e, a, r = _real_float64(e), _real_float64(a), _real_float64(r)
    mask = _finite(e, a, r)
    e, a, r = e[mask], a[mask], r[mask]
    error = _relative_error(a, r, tolerance.floor)
    eager_error = _relative_error(e, r, tolerance.floor)
    allowed = tolerance.multiplier * eager_error + tolerance.tol
    check.numbers = {
        "error": _json_float(error),
        "eager_error": _json_float(eager_error),
        "allowed": _json_float(allowed),
        "max_abs_diff_vs_eager": _json_float(float((a - e).abs().max()) if a.numel() else 0.0),
    }
    check.ratio = error / allowed if allowed > 0 else (0.0 if error == 0 else math.inf)
    if not error <= allowed:
        check.failure = (f"relative error against fp64 {error:.3e} exceeds "
                         f"{tolerance.multiplier:g} x eager's {eager_error:.3e} + "
                         f"{tolerance.tol:.1e} = {allowed:.3e}")


def _cosine_check(check: LeafCheck, e: torch.Tensor, a: torch.Tensor,
                  tolerance: Tolerance) -> None:
    e, a = _real_float64(e), _real_float64(a)
    mask = _finite(e, a)
    e, a = e[mask], a[mask]
    error = _relative_error(a, e, tolerance.floor)
    check.numbers = {
        "error_vs_eager": _json_float(error),
        "max_abs_diff_vs_eager": _json_float(float((a - e).abs().max()) if a.numel() else 0.0),
    }
    if e.numel() < tolerance.small_numel:
        scale = max(_rms(e), tolerance.floor)
        close = torch.allclose(a, e, rtol=tolerance.fallback, atol=tolerance.fallback * scale)
        check.ratio = error / tolerance.fallback
        if not close:
            check.failure = (f"values differ from eager beyond rtol {tolerance.fallback:.1e} "
                             f"(max abs difference {check.numbers['max_abs_diff_vs_eager']:.3e}, "
                             f"no fp64 reference)")
        return
    cosine = _cosine(a, e)
    check.numbers["cosine"] = _json_float(cosine)
    check.ratio = max(error / tolerance.fallback,
                      (1 - cosine) / (1 - tolerance.cosine) if tolerance.cosine < 1 else 0.0)
    if not cosine >= tolerance.cosine:
        check.failure = (f"cosine similarity to eager {cosine:.5f} is below "
                         f"{tolerance.cosine} (no fp64 reference)")
    elif not error <= tolerance.fallback:
        check.failure = (f"relative error against eager {error:.3e} exceeds "
                         f"{tolerance.fallback:.1e} (no fp64 reference)")


def _determinism_failure(a: Any, b: Any, tolerance: Tolerance) -> Optional[str]:
    ta, tb = _as_tensor(a), _as_tensor(b)
    if ta is None or tb is None:
        if (ta is None) != (tb is None) or not _plain_equal(a, b):
            return f"{_short(b)} in the second run, {_short(a)} in the first"
        return None
    what = "the first run"
    form = _form_failure(ta, tb, what)
    if form:
        return form
    if _dtype_kind(ta) in ("bool", "integer"):
        return _exact_failure(ta, tb, what)
    failure = _nonfinite_failure(ta, tb, what)
    if failure:
        return failure
    if torch.equal(ta, tb):
        return None
    fa, fb = _real_float64(ta), _real_float64(tb)
    mask = _finite(fa, fb)
    error = _relative_error(fb[mask], fa[mask], tolerance.floor)
    if error > tolerance.determinism:
        return (f"relative difference between the runs {error:.3e} exceeds "
                f"{tolerance.determinism:.1e}")
    return None


def _plain_equal(expected: Any, actual: Any) -> bool:
    if expected is None or actual is None:
        return expected is actual
    if type(expected) is not type(actual):
        return False
    try:
        return bool(expected == actual)
    except Exception:  # objects whose == is not a truth value
        return repr(expected) == repr(actual)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value) if not isinstance(value, torch.Tensor) else (
        f"Tensor[{str(value.dtype).replace('torch.', '')}, {tuple(value.shape)}]")
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------
# Verdicts


def _structure_failure(exc: StructureMismatch, method: str) -> Verdict:
    return Verdict(VerificationCode.FAIL, str(exc), {"method": method, "path": render_path(exc.path),
                                          "structure": exc.message})


def _verdict(checks: list[LeafCheck], method: str) -> Verdict:
    failures = [c for c in checks if c.failure]
    details: dict[str, Any] = {"method": method, "leaves": len(checks)}
    if failures:
        first = failures[0]
        path = render_path(first.path)
        more = (f" ({len(failures)} of {len(checks)} leaves fail; others: "
                f"{', '.join(render_path(c.path) for c in failures[1:6])}"
                f"{', ...' if len(failures) > 6 else ''})" if len(failures) > 1 else "")
        details.update(path=path, failed_leaves=len(failures),
                       failed_paths=[render_path(c.path) for c in failures[:20]], **first.numbers)
        return Verdict(VerificationCode.FAIL, f"{path}: {first.failure}{more}", details)
    if checks:
        worst = max(checks, key=lambda c: c.ratio)
        details.update(worst_path=render_path(worst.path), worst_ratio=_json_float(worst.ratio),
                       **worst.numbers)
    return Verdict(VerificationCode.PASS, None, details)
