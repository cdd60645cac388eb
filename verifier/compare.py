"""Compare an experiment's result with eager's, leaf by leaf, as PyTorch's harness does.

Each leaf gets `torch._dynamo.utils.same`'s verdict (verifier.leaf): with an fp64
reference, a floating leaf passes when it is allclose to eager at `tol`, or when its RMSE
against fp64 is at most a multiple of eager's plus tol / 10; without one (or for models
listed for it), when it is allclose to eager or its cosine similarity to eager is at least
0.99. Dtypes and shapes must be equal; booleans equal; integers allclose at `tol`; other
leaves ==. The verdict names the first failing leaf and keeps every leaf's numbers.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from core.schema import Verdict, VerificationCode
from verifier.leaf import LeafCheck, judge_leaf
from verifier.policies import FIELDS_COMPARED
from verifier.tolerance import Tolerance, tolerance_for
from verifier.tree import StructureMismatch, render_path, zip_leaves

__all__ = ["Tolerance", "tolerance_for", "compare", "compare_cosine", "eager_mismatch"]


def compare(
    reference_fp64: Any, expected_eager: Any, actual: Any, tolerance: Tolerance
) -> Verdict:
    """PASS or FAIL of `actual` against eager, judged with the fp64 reference.

    Without a reference (None), or with one whose structure differs from eager's, cosine
    similarity decides, as in the harness when its fp64 run fails (details["fp64"] says
    why). A model listed for cosine uses it whatever the reference.
    """
    if reference_fp64 is None:
        return compare_cosine(expected_eager, actual, tolerance).with_details(
            fp64="no fp64 reference")
    if tolerance.cosine:
        return compare_cosine(expected_eager, actual, tolerance).with_details(
            fp64="the model is listed for cosine similarity")
    try:
        references = {p: r for p, _, r in zip_leaves(
            expected_eager, reference_fp64, ("eager", "fp64 reference"), FIELDS_COMPARED)}
    except StructureMismatch as exc:
        return compare_cosine(expected_eager, actual, tolerance).with_details(
            fp64=f"fp64 reference unusable: {exc}")
    return _judge(expected_eager, actual, references, tolerance, tolerance.tol, "fp64")


def compare_cosine(expected: Any, actual: Any, tolerance: Tolerance) -> Verdict:
    """PASS or FAIL of `actual` against eager by cosine similarity (no fp64 reference)."""
    return _judge(expected, actual, {}, tolerance, tolerance.tol, "cosine")


def eager_mismatch(first: Any, second: Any, tolerance: Tolerance) -> Optional[str]:
    """Where and how two eager runs from the same seed differ, or None when they agree.

    The harness's check: `same()` at tol `tolerance.determinism` (0: equal), without a
    reference, NaN equal only where `equal_nan`.
    """
    verdict = _judge(first, second, {}, tolerance, tolerance.determinism, "determinism",
                     ("the first eager run", "the second eager run"))
    return None if verdict.passed else verdict.reason


def _judge(expected: Any, actual: Any, references: dict, tolerance: Tolerance, tol: float,
           method: str, names: tuple[str, str] = ("eager", "experiment")) -> Verdict:
    try:
        pairs = zip_leaves(expected, actual, names, FIELDS_COMPARED)
    except StructureMismatch as exc:
        return Verdict(VerificationCode.FAIL, str(exc),
                       {"method": method, "path": render_path(exc.path), "structure": exc.message})
    cosine = method == "cosine"
    checks = [judge_leaf(p, e, a, references.get(p), tolerance, tol, cosine, names)
              for p, e, a in pairs]
    return _verdict(checks, method, tolerance, tol)


def _json(value: float) -> Any:
    return value if math.isfinite(value) else str(value)


def _verdict(checks: list[LeafCheck], method: str, tolerance: Tolerance, tol: float) -> Verdict:
    failures = [c for c in checks if c.failure]
    details: dict[str, Any] = {"method": method, "leaves": len(checks), "tol": tol,
                               "equal_nan": tolerance.equal_nan}
    if tolerance.rule:
        details["tolerance_rule"] = tolerance.rule
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
        details.update(worst_path=render_path(worst.path), worst_ratio=_json(worst.ratio),
                       **worst.numbers)
    return Verdict(VerificationCode.PASS, None, details)
