import math

import pytest
import torch
from torch import nn

from tests.verifier.conftest import MLP, ManyOutputs, build, eval_run, inputs
from core.schema import Verdict, VerificationCode
from verifier.compare import compare, compare_cosine, eager_mismatch, tolerance_for
from verifier.tree import find_path, get_leaf, replace_leaf

FP32 = tolerance_for("fp32", "eval")


def nudge(result, path, scale=1e-2):
    """`result` with seeded noise of relative size `scale` added at `path`."""
    p = find_path(result, path)
    leaf = get_leaf(result, p)
    noise = torch.randn(leaf.shape, generator=torch.Generator().manual_seed(3))
    return replace_leaf(result, p, leaf + scale * leaf.pow(2).mean().sqrt() * noise)


def test_codes_are_the_peer_runners_codes():
    assert tuple(c.value for c in VerificationCode) == (
        "PASS", "FAIL", "EAGER_FAILED", "EXCEPTION_RAISED", "NONDETERMINISTIC_EAGER_RUN",
        "VERIFIER_SKIPPED", "VERIFIER_DIDNT_RUN")
    verdict = Verdict(VerificationCode.FAIL, "why", {"path": "output"})
    assert verdict.to_dict() == {"code": "FAIL", "reason": "why", "details": {"path": "output"}}
    assert Verdict.skipped("no --verify").code is VerificationCode.VERIFIER_SKIPPED


@pytest.mark.parametrize("args,kwargs,tol", [
    # Suites the harness lacks: its torchbench rules without the model lists.
    (("fp32", "eval", "builtin"), {}, 1e-4),
    (("bf16", "eval", "builtin"), {}, 1e-4),
    (("fp16", "eval", "builtin"), {}, 1e-3),
    (("amp", "train", "builtin"), {}, 1e-3),
    (("fp32", "train", "builtin"), {}, 1e-4),
    (("fp32", "train", "builtin"), {"device": "cuda"}, 1e-3),
    (("fp32", "eval", "torchbench"), {"model": "drq"}, 1e-4),
    (("fp16", "eval", "torchbench"), {"model": "drq"}, 1e-2),
    (("bf16", "eval", "torchbench"), {"model": "drq"}, 1e-2),
    (("amp", "eval", "torchbench"), {"model": "yolov3"}, 8e-2),
    (("fp32", "train", "torchbench"), {"model": "yolov3", "device": "cuda"}, 8e-2),
    (("fp32", "eval", "timm"), {}, 1e-3),
    (("bf16", "train", "timm"), {}, 1e-2),
    (("fp32", "train", "timm"), {"model": "inception_v3"}, 4e-2),
    (("fp32", "train", "timm"), {"model": "beit_base_patch16_224"}, 16e-2),
    (("fp32", "eval", "huggingface"), {}, 1e-3),
    (("fp32", "train", "huggingface"), {}, 1e-2),
    (("fp32", "train", "huggingface"), {"model": "MT5ForConditionalGeneration"}, 2e-2),
    (("fp32", "eval", "huggingface"), {"model": "GPT2ForSequenceClassification"}, 5e-3),
    (("fp32", "eval", "huggingface"), {"model": "GPT2ForSequenceClassification",
                                       "device": "cuda"}, 4e-3),
    # TF32 and bf16 matmuls: eager runs under them too; tol stays the harness's.
    (("fp32", "eval", "builtin", "high"), {}, 1e-4),
    (("fp32", "eval", "builtin", "medium"), {}, 1e-4),
])
def test_tolerances_are_the_harness_tables(args, kwargs, tol):
    assert tolerance_for(*args, **kwargs).tol == tol


def test_tolerance_flags_follow_the_harness():
    assert not tolerance_for("fp32", "eval").equal_nan  # --float32 turns equal_nan off
    assert all(tolerance_for(p, "eval").equal_nan for p in ("amp", "fp16", "bf16"))
    assert tolerance_for("fp32", "train", "timm", model="inception_v3") \
        .larger_multiplier_for_smaller_tensor
    assert not tolerance_for("fp32", "train", "timm").larger_multiplier_for_smaller_tensor
    assert tolerance_for("fp32", "eval", "torchbench", model="sam").iou_threshold == 0.95
    assert tolerance_for("fp32", "eval", "torchbench").iou_threshold is None
    assert tolerance_for("fp32", "eval").determinism == 0.0
    with pytest.raises(ValueError, match="'fp8'"):
        tolerance_for("fp8", "eval")
    with pytest.raises(ValueError, match="'infer'"):
        tolerance_for("fp32", "infer")


def test_same_results_pass_with_and_without_fp64(many_outputs_runs):
    reference, eager, again = many_outputs_runs
    verdict = compare(reference, eager, again, FP32)
    assert verdict.code is VerificationCode.PASS, verdict.reason
    assert verdict.details["method"] == "fp64" and verdict.details["leaves"] == 9
    assert compare_cosine(eager, again, FP32).code is VerificationCode.PASS


@pytest.mark.parametrize("path", ["output[2]['deep']['scores']", "output[2]['deep']['pair'][1]",
                                  "output[1]", "output[0]"])
def test_one_perturbed_leaf_fails_naming_its_path(many_outputs_runs, path):
    reference, eager, _ = many_outputs_runs
    # Cosine similarity tolerates 1% noise (as in the harness); 50% it does not.
    for verdict in (compare(reference, eager, nudge(eager, path), FP32),
                    compare_cosine(eager, nudge(eager, path, 0.5), FP32)):
        assert verdict.code is VerificationCode.FAIL
        assert verdict.reason.startswith(path + ": ")
        assert verdict.details["path"] == path and verdict.details["failed_leaves"] == 1


def test_without_fp64_every_element_of_a_tuple_counts():
    # PyTorch/XLA's verifier compared only the first element here, and passed.
    first, second, third = (torch.randn(64, generator=torch.Generator().manual_seed(i))
                            for i in range(3))
    eager = (first, second, third)
    actual = (first.clone(), second.flip(0), -third)
    verdict = compare_cosine(eager, actual, FP32)
    assert verdict.code is VerificationCode.FAIL
    assert verdict.details["failed_paths"] == ["output[1]", "output[2]"]
    assert "2 of 3 leaves fail" in verdict.reason
    assert compare(None, eager, actual, FP32).code is VerificationCode.FAIL


def test_scaled_output_passes_cosine_as_in_the_harness_but_not_the_fp64_rule():
    # Cosine similarity ignores scale: without fp64 the harness passes a scaled output. The
    # details still show its relative error; with fp64 the same output fails.
    reference = torch.randn(100, dtype=torch.float64)
    eager = (reference.float(),)
    verdict = compare_cosine(eager, (eager[0] * 1.01,), FP32)
    assert verdict.passed
    assert verdict.details["cosine"] == pytest.approx(1.0)
    assert verdict.details["relative_error_vs_eager"] == pytest.approx(0.01, rel=1e-3)
    assert compare((reference,), eager, (eager[0] * 1.01,), FP32).code is VerificationCode.FAIL


def test_small_tensors_and_scalars_without_fp64():
    eager = {"loss": torch.tensor(2.5), "stat": 0.75}
    assert compare_cosine(eager, {"loss": torch.tensor(2.5), "stat": 0.75}, FP32).passed
    # One-element cosine is 1 whenever the signs agree (the harness's rule) ...
    assert compare_cosine(eager, {"loss": torch.tensor(2.5), "stat": 0.76}, FP32).passed
    verdict = compare_cosine(eager, {"loss": torch.tensor(2.5), "stat": -0.75}, FP32)
    assert verdict.code is VerificationCode.FAIL and verdict.details["path"] == "stat"
    # ... and with an fp64 reference 0.76 is not 0.75.
    reference = {"loss": torch.tensor(2.5, dtype=torch.float64), "stat": 0.75}
    verdict = compare(reference, eager, {"loss": torch.tensor(2.5), "stat": 0.76}, FP32)
    assert verdict.code is VerificationCode.FAIL and verdict.details["path"] == "stat"


def test_error_within_a_multiple_of_eagers_own_error_passes():
    reference = torch.linspace(-3, 3, 200, dtype=torch.float64)
    noise = torch.randn(200, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    eager = (reference + 1e-3 * noise).float()
    tolerance = tolerance_for("fp32", "eval")
    close = (reference + 1.5e-3 * noise.flip(0)).float()
    far = (reference + 5e-3 * noise.flip(0)).float()
    assert compare(reference, eager, close, tolerance).passed
    verdict = compare(reference, eager, far, tolerance)
    assert verdict.code is VerificationCode.FAIL
    assert verdict.details["multiplier"] == 3  # fewer than 1000 elements
    assert verdict.details["error"] > verdict.details["allowed"] \
        == verdict.details["multiplier"] * verdict.details["eager_error"] + tolerance.tol / 10


def test_nan_follows_equal_nan():
    values = torch.randn(50, generator=torch.Generator().manual_seed(0))
    eager = values.clone()
    eager[[3, 7]] = math.nan
    eager[9] = math.inf
    reference = eager.double()
    fp16 = tolerance_for("fp16", "eval")
    # fp32 compares NaN as unequal (the harness's --float32): even identical results fail.
    verdict = compare(reference, eager, eager.clone(), FP32)
    assert verdict.code is VerificationCode.FAIL
    assert "NaN at 2 positions, eager's at 2 (the same places)" in verdict.reason
    assert "NaN never equals NaN in fp32 (equal_nan off)" in verdict.reason
    assert compare(reference, eager, eager.clone(), fp16).passed
    assert compare_cosine(eager, eager.clone(), FP32).passed  # cosine's allclose: NaN equal
    moved = eager.clone()
    moved[7], moved[8] = values[7], math.nan
    # NaN elsewhere: both RMSEs are NaN, which equal_nan passes (the harness's rule).
    assert compare(reference, eager, moved, fp16).passed
    verdict = compare_cosine(eager, moved, FP32)
    assert verdict.code is VerificationCode.FAIL and "cosine similarity to eager nan" in verdict.reason
    flipped = eager.clone()
    flipped[9] = -math.inf
    assert compare(reference, eager, flipped, FP32).code is VerificationCode.FAIL


def test_integers_and_booleans_compare_exactly(many_outputs_runs):
    reference, eager, _ = many_outputs_runs
    ids = eager[3].ids.clone()
    ids[0] += 1
    verdict = compare(reference, eager, replace_leaf(eager, find_path(eager, "[3].ids"), ids), FP32)
    assert verdict.code is VerificationCode.FAIL and verdict.details["path"] == "output[3].ids"
    assert "not allclose to eager at tol 0.0001 (largest difference 1.000e+00" in verdict.reason
    flags = ~eager[3].flags
    verdict = compare_cosine(eager, replace_leaf(eager, find_path(eager, "[3].flags"), flags), FP32)
    assert verdict.code is VerificationCode.FAIL and verdict.details["path"] == "output[3].flags"
    verdict = compare(reference, eager, replace_leaf(eager, find_path(eager, "[4]"), 5), FP32)
    assert verdict.code is VerificationCode.FAIL and verdict.details["path"] == "output[4]"
    assert compare_cosine({"n": 3, "b": True}, {"n": 3, "b": False}, FP32).details["path"] == "b"


def test_shapes_dtype_kinds_and_plain_leaves_must_match():
    t = torch.ones(2, 3)
    cases = [
        ((t,), (torch.ones(3, 2),), "shape (3, 2) differs from eager's (2, 3)"),
        ((t,), (t.long(),), "dtype int64 differs from eager's float32"),
        ((t,), (t.double(),), "dtype float64 differs from eager's float32"),
        ((t, None), (t, t), "experiment returned Tensor[float32, (2, 3)] where eager returned None"),
        ((t, "a"), (t, "b"), "experiment returned 'b' where eager returned 'a'"),
        ((t,), (t, t), "experiment returned tuple of 2 items where eager returned tuple of 1"),
    ]
    for eager, actual, message in cases:
        verdict = compare(None, eager, actual, FP32)
        assert verdict.code is VerificationCode.FAIL and message in verdict.reason, verdict.reason
    assert compare(None, (t, None, "a"), [t.clone(), None, "a"], FP32).passed
    verdict = compare(None, (t, None, "a"), [t.bfloat16(), None, "a"], tolerance_for("bf16", "eval"))
    assert verdict.code is VerificationCode.FAIL and "dtype bfloat16" in verdict.reason


def test_unusable_fp64_reference_falls_back_to_cosine():
    eager = (torch.randn(40), torch.randn(40))
    verdict = compare((eager[0].double(),), eager, (eager[0].clone(), eager[1].clone()), FP32)
    assert verdict.passed and verdict.details["method"] == "cosine"
    assert "fp64 reference unusable" in verdict.details["fp64"]


def chunked_forward(model: MLP, x: torch.Tensor, chunks: int = 4) -> torch.Tensor:
    """The MLP's forward with each matmul split along its inner dimension: other rounding."""
    for layer in model.layers:
        if isinstance(layer, nn.Linear):
            parts = zip(x.chunk(chunks, dim=-1), layer.weight.chunk(chunks, dim=-1))
            total = None
            for xs, ws in parts:
                partial = xs @ ws.T
                total = partial if total is None else total + partial
            x = total + layer.bias
        else:
            x = layer(x)
    return x


@pytest.mark.parametrize("dtype,precision", [(torch.bfloat16, "bf16"), (torch.float16, "fp16")])
def test_reduced_precision_runs_of_a_real_model_pass(dtype, precision):
    x = inputs(batch=16)
    reference = eval_run(MLP, torch.float64, x)()
    eager = eval_run(MLP, dtype, x)()
    with torch.no_grad():
        actual = chunked_forward(build(MLP).to(dtype), x.to(dtype))
    assert not torch.equal(actual, eager)  # really computed another way
    tolerance = tolerance_for(precision, "eval")
    verdict = compare(reference, eager, actual, tolerance)
    assert verdict.passed, verdict.reason
    # Against fp32 eager it fails: dtypes must be equal.
    eager32 = eval_run(MLP, torch.float32, x)()
    verdict = compare(reference, eager32, actual, tolerance)
    assert verdict.code is VerificationCode.FAIL and "dtype" in verdict.reason


def test_eager_mismatch():
    run = eval_run(ManyOutputs)
    first, second = run(), run()
    assert eager_mismatch(first, second, FP32) is None
    message = eager_mismatch(first, nudge(second, "[2]['deep']['scores']", 1e-5), FP32)
    assert message.startswith(
        "output[2]['deep']['scores']: not allclose to the first eager run at tol 0 ")
    assert eager_mismatch((1, "a"), (1, "b"), FP32) == \
        "output[1]: the second eager run returned 'b' where the first eager run returned 'a'"


def test_verdicts_are_strict_json(many_outputs_runs):
    import json

    reference, eager, _ = many_outputs_runs
    nan_eager = (torch.tensor([math.nan, 1.0]),)
    for verdict in (compare(reference, eager, eager, FP32),
                    compare(reference, eager, nudge(eager, "[1]"), FP32),
                    compare_cosine(nan_eager, (torch.tensor([1.0, math.nan]),), FP32),
                    compare(None, (torch.zeros(20),), (torch.ones(20),), FP32)):
        json.dumps(verdict.to_dict(), allow_nan=False)


def test_a_leaf_that_is_zero_in_fp64_is_judged_by_its_absolute_error():
    # The gradient of a conv bias feeding a batch norm is exactly zero in fp64 and rounding
    # noise in fp32; noise of the same size in the experiment must not fail it, a real
    # error must (allclose's atol and the RMSE rule are absolute).
    reference = {"weight": torch.full((64,), 5e-2, dtype=torch.float64),
                 "bias": torch.zeros(16, dtype=torch.float64)}
    eager = {"weight": reference["weight"].float(), "bias": torch.full((16,), 1.5e-8)}
    actual = {"weight": reference["weight"].float(), "bias": torch.full((16,), -4e-8)}
    assert compare(reference, eager, actual, tolerance_for("fp32", "train")).code == VerificationCode.PASS
    wrong = {"weight": reference["weight"].float(), "bias": torch.full((16,), 1e-3)}
    verdict = compare(reference, eager, wrong, tolerance_for("fp32", "train"))
    assert verdict.code == VerificationCode.FAIL and "bias" in verdict.reason
