"""Planted cases: our verdict must be the harness's (`torch._dynamo.utils.same`).

Each case is a small scene (eager's result, the experiment's, the fp64 reference or None,
and the experiment's tolerance); the test runs `verifier.compare.compare` and `same()`
with the same inputs and the arguments the harness would pass, and asserts the two
verdicts agree (and, where a case says, what the verdict is). To add a case, append a
`Case` to CASES. Cases where the runner decides otherwise on purpose are in DIFFERENCES,
each with its reason; docs/verifier.md lists them too.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.schema import VerificationCode
from tests.verifier.conftest import MLP, eval_run, inputs, train_run
from verifier.compare import compare, eager_mismatch
from verifier.tolerance import Tolerance, tolerance_for

same = pytest.importorskip("torch._dynamo.utils").same
SAME_HAS_IOU = "use_iou_for_bool" in inspect.signature(same).parameters

Scene = tuple[Any, Any, Any]  # eager, experiment, fp64 reference (None: none)


def oracle(eager: Any, actual: Any, fp64: Any, tolerance: Tolerance) -> bool:
    """The harness's verdict: `same()` called as its accuracy check calls it. Where fp64
    did not run, the harness falls back to cosine similarity; an exception inside `same()`
    fails the model."""
    kwargs: dict[str, Any] = dict(
        cos_similarity=tolerance.cosine or fp64 is None, tol=tolerance.tol,
        equal_nan=tolerance.equal_nan,
        use_larger_multiplier_for_smaller_tensor=tolerance.larger_multiplier_for_smaller_tensor,
        log_error=lambda *args, **kw: None)
    if tolerance.iou_threshold is not None:
        kwargs.update(use_iou_for_bool=True, iou_threshold=tolerance.iou_threshold)
    try:
        return bool(same(eager, actual, fp64, **kwargs))
    except Exception:
        return False


def ours(eager: Any, actual: Any, fp64: Any, tolerance: Tolerance) -> bool:
    verdict = compare(fp64, eager, actual, tolerance)
    assert verdict.code in (VerificationCode.PASS, VerificationCode.FAIL)
    if not verdict.passed:
        assert verdict.reason and verdict.details["path"], verdict
    return verdict.passed


def seeded(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def rounded(reference: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return reference.to(dtype)


def with_value(tensor: torch.Tensor, index: int, value: float) -> torch.Tensor:
    changed = tensor.clone()
    changed.view(-1)[index] = value
    return changed


FP32 = tolerance_for("fp32", "eval", "builtin")
FP32_TRAIN = tolerance_for("fp32", "train", "builtin")
FP16 = tolerance_for("fp16", "eval", "builtin")
BF16 = tolerance_for("bf16", "eval", "builtin")
TIMM = tolerance_for("fp32", "eval", "timm")
LARGER = tolerance_for("fp32", "eval", "timm", model="inception_v3")
IOU = tolerance_for("fp32", "eval", "torchbench", model="sam")


@dataclass(frozen=True)
class Case:
    """A planted scene, its tolerance, and the verdict the harness gives (True: pass)."""

    name: str
    scene: Callable[[], Scene]
    tolerance: Tolerance = FP32
    passes: Optional[bool] = None  # None: whatever same() says (asserted to agree)
    needs_iou: bool = False


# ---------------------------------------------------------------------------------------
# Scenes


def issue_54_case() -> Scene:
    """One element of 8,192 off by 30%: it is -0.018, the output's mean magnitude 0.8."""
    fp64 = with_value(seeded(8192), 100, -0.018)
    eager = rounded(fp64)
    return eager, with_value(eager, 100, -0.018 * 1.3), fp64


def noisy(scale: float, n: int = 4096, dtype: torch.dtype = torch.float32) -> Callable[[], Scene]:
    """Eager off fp64 by noise of RMS 1e-2; the experiment by `scale` x the same noise,
    shuffled (so its RMSE against fp64 is about `scale` x eager's)."""
    def scene() -> Scene:
        fp64 = seeded(n)
        noise = 1e-2 * seeded(n, seed=7)
        shuffled = noise[torch.randperm(n, generator=torch.Generator().manual_seed(1))]
        return (fp64 + noise).to(dtype), (fp64 + scale * shuffled).to(dtype), fp64
    return scene


def nan_scene(eager_at: list[int], actual_at: list[int], dtype: torch.dtype = torch.float32,
              fp64_nan: bool = True, offset: float = 0.0) -> Callable[[], Scene]:
    def scene() -> Scene:
        fp64 = seeded(256)
        eager, actual = rounded(fp64, dtype), (fp64 + offset).to(dtype)
        eager[eager_at] = math.nan
        actual[actual_at] = math.nan
        if fp64_nan:
            fp64 = fp64.clone()
            fp64[eager_at] = math.nan
        return eager, actual, fp64
    return scene


def inf_scene(sign: float) -> Scene:
    fp64 = seeded(64)
    fp64[5] = math.inf
    eager = rounded(fp64)
    return eager, with_value(eager, 5, sign * math.inf), fp64


def one_off(n: int, index: int, factor: float, shape: Optional[tuple[int, ...]] = None,
            dtype: torch.dtype = torch.float32) -> Callable[[], Scene]:
    """Eager equals fp64 rounded; the experiment has one element times `factor`."""
    def scene() -> Scene:
        fp64 = seeded(n).reshape(shape or (n,))
        eager = rounded(fp64, dtype)
        return eager, with_value(eager, index, float(eager.view(-1)[index]) * factor), fp64
    return scene


def integers(delta: int, base: int = 0) -> Scene:
    ids = torch.arange(base, base + 16)
    return ids, with_value(ids, 3, base + 3 + delta), ids.clone()


def flags(flip: bool) -> Scene:
    mask = seeded(32) > 0
    actual = mask.clone()
    if flip:
        actual[0] = ~actual[0]
    return mask, actual, mask.clone()


def iou_masks(flipped: int) -> Scene:
    mask = torch.zeros(1000, dtype=torch.bool)
    mask[:500] = True
    actual = mask.clone()
    actual[500:500 + flipped] = True
    return mask, actual, mask.clone()


def without_fp64(change: Callable[[torch.Tensor], torch.Tensor],
                 n: int = 512) -> Callable[[], Scene]:
    def scene() -> Scene:
        eager = rounded(seeded(n))
        return eager, change(eager.clone()), None
    return scene


def nested(fail: bool) -> Scene:
    fp64 = {"logits": seeded(8, 16), "aux": (seeded(16, seed=1), {"scores": seeded(4, 8, seed=2)}),
            "count": 3, "name": "head", "mask": seeded(8) > 0}
    eager = {"logits": fp64["logits"].float(),
             "aux": (fp64["aux"][0].float(), {"scores": fp64["aux"][1]["scores"].float()}),
             "count": 3, "name": "head", "mask": fp64["mask"].clone()}
    actual = {"logits": eager["logits"].clone(),
              "aux": (eager["aux"][0].clone(),
                      {"scores": eager["aux"][1]["scores"] * (1.02 if fail else 1.0)}),
              "count": 3, "name": "head", "mask": eager["mask"].clone()}
    return eager, actual, fp64


def training(scale: float) -> Callable[[], Scene]:
    def scene() -> Scene:
        def hook(model: torch.nn.Module) -> None:
            model.layers[2].weight.register_hook(lambda grad: grad * scale)
        return train_run(MLP)(), train_run(MLP, hook=hook)(), train_run(MLP, torch.float64)()
    return scene


def reduced_model(dtype: torch.dtype) -> Callable[[], Scene]:
    """A real MLP in `dtype`, the experiment computing its batch in two halves."""
    def scene() -> Scene:
        x = inputs(batch=16)
        eager = eval_run(MLP, dtype, x)()
        halves = torch.cat([eval_run(MLP, dtype, part)() for part in x.chunk(2)])
        return eager, halves, eval_run(MLP, torch.float64, x)()
    return scene


def question_answering(logits_off: bool) -> Scene:
    outputs = pytest.importorskip("transformers.modeling_outputs")
    fp64 = outputs.QuestionAnsweringModelOutput(
        loss=torch.tensor(2.5, dtype=torch.float64), start_logits=seeded(2, 8),
        end_logits=seeded(2, 8, seed=1))
    eager = outputs.QuestionAnsweringModelOutput(
        loss=torch.tensor(2.5), start_logits=fp64.start_logits.float(),
        end_logits=fp64.end_logits.float())
    actual = outputs.QuestionAnsweringModelOutput(
        loss=torch.tensor(2.5),
        start_logits=-eager.start_logits if logits_off else eager.start_logits,
        end_logits=eager.end_logits)
    return eager, actual, fp64


CASES = [
    Case("issue 54: one element of 8192 off by 30% fails at tol 1e-4", issue_54_case, FP32, False),
    Case("issue 54's output passes at timm's tol 1e-3, as in the harness", issue_54_case,
         TIMM, True),
    Case("identical results", noisy(1.0), FP32, True),
    Case("1.5 x eager's own error against fp64", noisy(1.5), FP32, True),
    Case("3 x eager's own error against fp64", noisy(3.0), FP32, False),
    Case("fp16: 2.5 x eager's error (multiplier 3)", noisy(2.5, dtype=torch.float16), FP16, True),
    Case("fp16: 4 x eager's error", noisy(4.0, dtype=torch.float16), FP16, False),
    Case("bf16: 2.5 x eager's error (multiplier 3)", noisy(2.5, dtype=torch.bfloat16), BF16, True),
    Case("a real bf16 model computed in halves", reduced_model(torch.bfloat16), BF16),
    Case("a real fp16 model computed in halves", reduced_model(torch.float16), FP16),
    Case("small tensor (500 elements) gets multiplier 3", noisy(2.5, n=500), FP32, True),
    Case("large tensor (4096 elements) keeps multiplier 2", noisy(2.5, n=4096), FP32, False),
    Case("listed model, 8 elements: multiplier 10", noisy(9.0, n=8), LARGER, True),
    Case("listed model, 400 elements: multiplier 8", noisy(7.0, n=400), LARGER, True),
    Case("listed model, 400 elements: 9 x fails", noisy(9.0, n=400), LARGER, False),
    Case("unlisted model, 8 elements: 9 x fails", noisy(9.0, n=8), TIMM, False),
    Case("1x1 kernel shape: multiplier 3", one_off(2048, 0, 1.0 + 1e-6, (2048, 1, 1, 1))),
    Case("a scalar loss off by 1e-5 relative", one_off(1, 0, 1 + 1e-5, ()), FP32),
    Case("a scalar loss off by 1e-3 relative", one_off(1, 0, 1 + 1e-3, ()), FP32, False),
    Case("NaN at the same places, fp32 (equal_nan off)", nan_scene([3, 7], [3, 7]), FP32, False),
    Case("NaN at the same places, fp16 (equal_nan on)",
         nan_scene([3, 7], [3, 7], torch.float16), FP16, True),
    Case("NaN at other places, equal_nan on: both errors NaN pass",
         nan_scene([3], [9], torch.float16), FP16, True),
    Case("NaN in the experiment only", nan_scene([], [9], torch.float16, fp64_nan=False),
         FP16, False),
    Case("NaN in eager only, the experiment close to fp64",
         nan_scene([3], [], fp64_nan=False, offset=1e-3), FP32, True),
    Case("NaN in eager only, the experiment far from fp64",
         nan_scene([3], [], fp64_nan=False, offset=1.0), FP32, False),
    Case("infinity with eager's sign", lambda: inf_scene(1.0), FP32, True),
    Case("infinity with the other sign", lambda: inf_scene(-1.0), FP32, False),
    Case("integers off by one", lambda: integers(1), FP32, False),
    Case("large integers within rtol", lambda: integers(50, base=10 ** 6), FP32, True),
    Case("large integers beyond rtol", lambda: integers(500, base=10 ** 6), FP32, False),
    Case("equal booleans", lambda: flags(False), FP32, True),
    Case("one boolean flipped", lambda: flags(True), FP32, False),
    Case("IoU 500/505 passes a listed model at 0.95", lambda: iou_masks(5), IOU, True, True),
    Case("IoU 500/600 fails a listed model", lambda: iou_masks(100), IOU, False, True),
    Case("float16 where eager has float32",
         lambda: (seeded(8).float(), seeded(8).half(), seeded(8)), FP32, False),
    Case("int32 where eager has int64",
         lambda: (torch.arange(4), torch.arange(4, dtype=torch.int32), torch.arange(4)),
         FP32, False),
    Case("Python float off by 1e-3", lambda: (0.75, 0.751, 0.75), FP32, False),
    Case("equal Python ints, strings and None", lambda: ((3, "a", None), (3, "a", None),
                                                        (3, "a", None)), FP32, True),
    Case("Python int differs", lambda: ((3, 4), (3, 5), (3, 4)), FP32, False),
    Case("nested dicts and tuples, equal", lambda: nested(False), FP32, True),
    Case("nested dicts and tuples, one deep leaf 2% off", lambda: nested(True), FP32, False),
    Case("training: unchanged gradients", training(1.0), FP32_TRAIN, True),
    Case("training: one gradient 5% off", training(1.05), FP32_TRAIN, False),
    Case("question answering: only the loss counts", lambda: question_answering(True), FP32, True),
    Case("no fp64: allclose passes", without_fp64(lambda t: t + 1e-5), FP32, True),
    Case("no fp64: 1% noise keeps cosine above 0.99",
         without_fp64(lambda t: t + 1e-2 * seeded(512, seed=9).float()), FP32, True),
    Case("no fp64: 20% noise drops cosine below 0.99",
         without_fp64(lambda t: t + 0.2 * seeded(512, seed=9).float()), FP32, False),
    Case("no fp64: a scaled output passes cosine", without_fp64(lambda t: t * 1.5), FP32, True),
    Case("no fp64: a negated output fails", without_fp64(lambda t: -t), FP32, False),
    Case("no fp64: zeros against zeros", lambda: (torch.zeros(10), torch.zeros(10), None),
         FP32, True),
    Case("no fp64: scalars pass cosine whenever their sign agrees",
         lambda: (torch.tensor(2.5), torch.tensor(2.6), None), FP32, True),
    Case("no fp64: one boolean flipped", lambda: flags(True)[:2] + (None,), FP32, False),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_our_verdict_is_the_harness_verdict(case: Case):
    eager, actual, fp64 = case.scene()
    verdict = ours(eager, actual, fp64, case.tolerance)
    if case.needs_iou and not SAME_HAS_IOU:
        assert verdict == case.passes  # this torch's same() has no IoU: the harness's value
        return
    harness = oracle(eager, actual, fp64, case.tolerance)
    assert verdict == harness, f"ours {'PASS' if verdict else 'FAIL'}, same() {harness}"
    if case.passes is not None:
        assert verdict == case.passes


# ---------------------------------------------------------------------------------------
# Where the runner decides otherwise on purpose (docs/verifier.md, "Differences").


@dataclass
class Pair:
    value: torch.Tensor


DIFFERENCES = [
    ("shapes must be equal (allclose would broadcast (1,) against (4,))",
     lambda: (torch.ones(4), torch.ones(1), torch.ones(4, dtype=torch.float64)), False),
    ("a dataclass is compared field by field (same() raises on it)",
     lambda: (Pair(torch.ones(4)), Pair(torch.ones(4)), Pair(torch.ones(4, dtype=torch.float64))),
     True),
]


@pytest.mark.parametrize("name,scene,passes", DIFFERENCES, ids=[d[0] for d in DIFFERENCES])
def test_documented_differences_still_differ(name, scene, passes):
    eager, actual, fp64 = scene()
    assert ours(eager, actual, fp64, FP32) is passes
    assert oracle(eager, actual, fp64, FP32) is (not passes)


# ---------------------------------------------------------------------------------------
# Two eager runs: the harness's same() at tol 0.


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("second", ["equal", "last bit", "nan"])
def test_eager_determinism_is_the_harness_check(precision, second):
    tolerance = tolerance_for(precision, "eval", "builtin")
    first = seeded(64, dtype=torch.float32)
    if second == "nan":
        first[3] = math.nan
    other = first.clone()
    if second == "last bit":
        other[5] = torch.nextafter(other[5], torch.tensor(math.inf))
    harness = bool(same(first, other, None, tol=0, equal_nan=tolerance.equal_nan,
                        log_error=lambda *a, **k: None))
    assert (eager_mismatch(first, other, tolerance) is None) == harness


# ---------------------------------------------------------------------------------------
# Random scenes


DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    precision=st.sampled_from(sorted(DTYPES)),
    suite=st.sampled_from(["builtin", "timm", "huggingface"]),
    numel=st.sampled_from([1, 7, 300, 999, 1000, 3000]),
    seed=st.integers(0, 2 ** 16),
    error=st.floats(0.0, 6.0),
    spike=st.one_of(st.none(), st.floats(-2.0, 2.0)),
    nans=st.sampled_from(["none", "both", "eager", "experiment"]),
    with_fp64=st.booleans(),
    larger=st.booleans(),
)
def test_random_scenes_agree_with_the_harness(precision, suite, numel, seed, error, spike,
                                              nans, with_fp64, larger):
    dtype = DTYPES[precision]
    tolerance = tolerance_for(precision, "eval", suite)
    tolerance = dataclasses.replace(tolerance, larger_multiplier_for_smaller_tensor=larger)
    fp64 = seeded(numel, seed=seed) * 3
    eager = fp64.to(dtype)
    rounding = eager.double() - fp64
    shuffled = rounding[torch.randperm(numel, generator=torch.Generator().manual_seed(seed))]
    actual = (fp64 + error * shuffled).to(dtype)
    if spike is not None:
        actual = with_value(actual, seed % numel, float(actual[seed % numel]) * (1 + spike))
    if nans in ("both", "eager"):
        eager[0] = math.nan
    if nans in ("both", "experiment"):
        actual[(seed // 3) % numel] = math.nan
    reference = fp64 if with_fp64 else None
    assert ours(eager, actual, reference, tolerance) == oracle(eager, actual, reference, tolerance)
