"""How close an experiment must be to eager, by precision, test and suite."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

# Relative-RMSE slack added to `multiplier` x eager's own error against fp64.
_BASE = {
    ("fp32", "eval"): 1e-4,
    ("fp32", "train"): 1e-3,
    ("amp", "eval"): 1e-2,
    ("amp", "train"): 2e-2,
    ("fp16", "eval"): 1e-2,
    ("fp16", "train"): 2e-2,
    ("bf16", "eval"): 2e-2,
    ("bf16", "train"): 4e-2,
}

# Suites whose models are deep enough for rounding to add up further.
SUITE_FACTORS = {"timm": 2.0, "torchbench": 2.0}

# fp32 matmuls in TF32 ("high") or bf16 passes ("medium") lose precision like reduced types.
_MATMUL_FLOOR = {"highest": 0.0, "high": 1e-3, "medium": 1e-2}


@dataclass(frozen=True)
class Tolerance:
    """Thresholds of one verification (errors are relative RMSEs, see verifier.compare).

    tol: slack added to `multiplier` x eager's error against the fp64 reference.
    cosine: least cosine similarity to eager when there is no fp64 reference.
    fallback: largest relative error against eager when there is no fp64 reference.
    determinism: largest relative error between two eager runs from the same seed.
    floor: RMS below which a reference counts as zero (errors become absolute there).
    small_numel: tensors with fewer elements use an elementwise allclose, not cosine.
    """

    tol: float
    multiplier: float = 2.0
    cosine: float = 0.99
    fallback: float = 5e-4
    determinism: float = 1e-6
    floor: float = 1e-6
    small_numel: int = 16

    def scaled(self, factor: float) -> "Tolerance":
        """Every error threshold multiplied by `factor` (cosine and floor unchanged)."""
        return replace(self, tol=self.tol * factor, fallback=self.fallback * factor,
                       determinism=self.determinism * factor)


def tolerance_for(
    precision: str,
    test: str,
    suite: Optional[str] = None,
    matmul_precision: str = "highest",
) -> Tolerance:
    """The tolerance of an experiment; ValueError naming a precision or test it does not know."""
    if (precision, "eval") not in _BASE:
        known = sorted({p for p, _ in _BASE})
        raise ValueError(f"no verifier tolerance for precision {precision!r}; known: {known}")
    if test not in ("eval", "train"):
        raise ValueError(f"no verifier tolerance for test {test!r}; expected eval or train")
    if matmul_precision not in _MATMUL_FLOOR:
        raise ValueError(f"unknown matmul precision {matmul_precision!r}; "
                         f"expected one of {sorted(_MATMUL_FLOOR)}")
    tol = max(_BASE[(precision, test)], _MATMUL_FLOOR[matmul_precision])
    reduced = precision != "fp32" or matmul_precision != "highest"
    tolerance = Tolerance(
        tol=tol,
        multiplier=3.0 if reduced else 2.0,
        fallback=5 * tol,
        determinism=tol / 100,
    )
    return tolerance.scaled(SUITE_FACTORS.get(suite or "", 1.0))
