"""How close an experiment must be to eager: the harness's `same()` arguments, per experiment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from verifier.policies import MATMUL_PRECISIONS, NAN_UNEQUAL_PRECISIONS, suite_policy

PRECISIONS = ("fp32", "amp", "fp16", "bf16")
TESTS = ("eval", "train")


@dataclass(frozen=True)
class Tolerance:
    """The arguments of one verification, named as `torch._dynamo.utils.same` names them.

    tol: allclose's atol and rtol against eager; a tenth of it is the slack of the fp64 rule
        (RMSE against fp64 at most multiplier x eager's + tol / 10).
    cosine: judge floating leaves by cosine similarity to eager, not by the fp64 rule.
    equal_nan: NaN equals NaN (off in fp32, as the harness's --float32 sets it).
    larger_multiplier_for_smaller_tensor: tensors of at most 10 (500) elements get a
        multiplier of 10 (8).
    iou_threshold: boolean leaves pass on an intersection over union at least this high;
        None: they must be equal.
    determinism: the tol between two eager runs from the same seed (0: equal).
    rule: where `tol` came from, for the verdict's details.
    """

    tol: float
    cosine: bool = False
    equal_nan: bool = False
    larger_multiplier_for_smaller_tensor: bool = False
    iou_threshold: Optional[float] = None
    determinism: float = 0.0
    rule: str = ""


def tolerance_for(
    precision: str,
    test: str,
    suite: Optional[str] = None,
    matmul_precision: str = "highest",
    model: Optional[str] = None,
    device: str = "cpu",
) -> Tolerance:
    """The tolerance of an experiment; ValueError naming a precision or test it does not know.

    `suite`, `model` and `device` select the harness's per-suite and per-model tables
    (verifier.policies); a suite the harness does not have gets the general rules.
    `matmul_precision` is checked and named in `rule`; it does not change `tol` (eager runs
    under it too, and the fp64 rule is a multiple of eager's own error).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"no verifier tolerance for precision {precision!r}; "
                         f"known: {sorted(PRECISIONS)}")
    if test not in TESTS:
        raise ValueError(f"no verifier tolerance for test {test!r}; expected eval or train")
    if matmul_precision not in MATMUL_PRECISIONS:
        raise ValueError(f"unknown matmul precision {matmul_precision!r}; "
                         f"expected one of {sorted(MATMUL_PRECISIONS)}")
    policy = suite_policy(suite)
    rule = policy.rule_for(test, precision, device, model)
    source = f"{suite or 'general'} {test} {precision} on {device}"
    if model is not None:
        source += f" for {model}"
    source += f": tol {rule.tol:g}"
    if matmul_precision != "highest":
        source += f" (matmul precision {matmul_precision})"
    return Tolerance(
        tol=rule.tol,
        cosine=rule.cosine,
        equal_nan=precision not in NAN_UNEQUAL_PRECISIONS,
        larger_multiplier_for_smaller_tensor=model in policy.larger_multiplier_models,
        iou_threshold=policy.iou_thresholds.get(model or ""),
        rule=source,
    )
