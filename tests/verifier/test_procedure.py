import os

import pytest
import torch
from torch import nn

from tests.verifier.conftest import MLP, ManyOutputs, eval_run, train_run
from verifier import procedure
from core.schema import VerificationCode
from verifier.compare import tolerance_for
from verifier.procedure import verify
from verifier.tree import find_path, get_leaf, replace_leaf

FP32 = tolerance_for("fp32", "eval")
TRAIN = tolerance_for("fp32", "train")


def perturbed(run, path, scale=1e-2):
    def perturbed_run():
        result = run()
        p = find_path(result, path)
        leaf = get_leaf(result, p)
        noise = torch.randn(leaf.shape, generator=torch.Generator().manual_seed(5))
        return replace_leaf(result, p, leaf + scale * leaf.pow(2).mean().sqrt() * noise)
    return perturbed_run


def test_an_unchanged_experiment_passes_against_fp64():
    verdict = verify(eval_run(ManyOutputs), eval_run(ManyOutputs, torch.float64),
                     eval_run(ManyOutputs), tolerance=FP32)
    assert verdict.code is VerificationCode.PASS and verdict.reason is None
    assert verdict.details["method"] == "fp64"


@pytest.mark.parametrize("path", ["[1]", "[2]['deep']['pair'][1]"])
def test_a_perturbed_output_fails_naming_it(path):
    run = eval_run(ManyOutputs)
    verdict = verify(run, eval_run(ManyOutputs, torch.float64), perturbed(run, path),
                     tolerance=FP32)
    assert verdict.code is VerificationCode.FAIL
    assert verdict.reason.startswith(f"output{path}: RMSE against fp64")


class NoisyModel(nn.Module):
    """Draws fresh entropy on every call, whatever the global seed."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(32, 8)

    def forward(self, x):
        generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
        return (self.linear(x), self.linear(x) + torch.rand(8, generator=generator))


def test_a_random_eager_result_is_nondeterministic():
    verdict = verify(eval_run(NoisyModel), None, eval_run(NoisyModel), tolerance=FP32)
    assert verdict.code is VerificationCode.NONDETERMINISTIC_EAGER_RUN
    assert "output[1]: not allclose to the first eager run at tol 0 " in verdict.reason


class DropoutMLP(MLP):
    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return super().forward(self.drop(x))


def test_dropout_in_training_without_reseeding_is_nondeterministic():
    run = train_run(DropoutMLP)
    verdict = verify(run, None, run, tolerance=TRAIN)
    assert verdict.code is VerificationCode.NONDETERMINISTIC_EAGER_RUN
    assert verdict.reason.startswith("two eager runs from the same seed differ: loss")


def test_a_listed_nondeterministic_model_is_not_run():
    calls = []

    def run():
        calls.append(1)
        return torch.zeros(1)

    verdict = verify(run, run, run, tolerance=FP32,
                     nondeterministic_reason="samples with torch.multinomial")
    assert verdict.code is VerificationCode.NONDETERMINISTIC_EAGER_RUN
    assert "samples with torch.multinomial" in verdict.reason and calls == []


def failing(message, after=0):
    calls = []

    def run():
        calls.append(1)
        if len(calls) > after:
            raise RuntimeError(message)
        return torch.ones(3)
    return run


def test_eager_raising_is_eager_failed_with_its_text():
    verdict = verify(failing("mat1 and mat2 shapes cannot be multiplied"), None,
                     eval_run(MLP), tolerance=FP32)
    assert verdict.code is VerificationCode.EAGER_FAILED
    assert verdict.reason.startswith("the first eager run raised RuntimeError: mat1 and mat2")
    assert "test_procedure.py" in verdict.reason
    verdict = verify(failing("out of memory", after=1), None, eval_run(MLP), tolerance=FP32)
    assert verdict.code is VerificationCode.EAGER_FAILED and "the second eager run" in verdict.reason


def test_the_experiment_raising_is_exception_raised():
    verdict = verify(eval_run(MLP), None, failing("lowering failed: aten::gelu"), tolerance=FP32)
    assert verdict.code is VerificationCode.EXCEPTION_RAISED
    assert "the experiment raised RuntimeError: lowering failed: aten::gelu" in verdict.reason


def test_a_failing_comparison_is_exception_raised(monkeypatch):
    def broken(*args):
        raise TypeError("unexpected leaf")

    monkeypatch.setattr(procedure, "compare", broken)
    verdict = verify(eval_run(MLP), None, eval_run(MLP), tolerance=FP32)
    assert verdict.code is VerificationCode.EXCEPTION_RAISED
    assert verdict.reason.startswith("the comparison raised TypeError: unexpected leaf")


def test_without_a_working_fp64_run_cosine_decides():
    run = eval_run(ManyOutputs)
    verdict = verify(run, failing("fp64 not supported on this device"), run, tolerance=FP32)
    assert verdict.passed and verdict.details["method"] == "cosine"
    assert "fp64 not supported on this device" in verdict.details["fp64"]
    verdict = verify(run, None, perturbed(run, "[2]['deep']['pair'][1]", scale=0.5), tolerance=FP32)
    assert verdict.code is VerificationCode.FAIL and verdict.details["method"] == "cosine"
    assert verdict.details["path"] == "output[2]['deep']['pair'][1]"
    assert verdict.details["fp64"] == "no fp64 reference for this experiment"


def test_training_passes_and_a_wrong_gradient_fails_naming_it():
    assert verify(train_run(MLP), train_run(MLP, torch.float64), train_run(MLP),
                  tolerance=TRAIN).passed

    def scale_one_gradient(model):
        model.layers[2].weight.register_hook(lambda grad: grad * 1.05)

    verdict = verify(train_run(MLP), train_run(MLP, torch.float64),
                     train_run(MLP, hook=scale_one_gradient), tolerance=TRAIN)
    assert verdict.code is VerificationCode.FAIL
    assert verdict.reason.startswith("gradients['layers.2.weight']: RMSE against fp64")
    assert verdict.details["failed_paths"] == ["gradients['layers.2.weight']"]


@pytest.mark.parametrize("dtype,precision", [(torch.bfloat16, "bf16"), (torch.float16, "fp16")])
def test_reduced_precision_training_passes(dtype, precision):
    eager, experiment = train_run(MLP, dtype), train_run(MLP, dtype, halves=True)
    assert not torch.equal(eager()["gradients"]["layers.0.weight"],
                           experiment()["gradients"]["layers.0.weight"])
    verdict = verify(eager, train_run(MLP, torch.float64), experiment,
                     tolerance=tolerance_for(precision, "train"))
    assert verdict.passed, verdict.reason
    assert verdict.details["leaves"] == 7


def test_model_output_objects_are_compared_by_key():
    modeling_outputs = pytest.importorskip("transformers.modeling_outputs")

    class HFStyle(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = MLP()

        def forward(self, x):
            logits = self.body(x)
            return modeling_outputs.SequenceClassifierOutput(logits=logits, hidden_states=(x, logits))

    run = eval_run(HFStyle)
    assert isinstance(run(), modeling_outputs.SequenceClassifierOutput)
    verdict = verify(run, eval_run(HFStyle, torch.float64), perturbed(run, "hidden_states[1]"),
                     tolerance=FP32)
    assert verdict.code is VerificationCode.FAIL and verdict.details["path"] == "hidden_states[1]"
