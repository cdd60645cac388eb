import pytest
import torch

from backends.runtimes.fp64 import Fp64PreparedModel
from backends.stacks.debug_perturb import DebugPerturbStack
from backends.stacks.eager import EagerStack
from backends.stacks.openxla import OpenXlaStack
from models import get_suite
from core.config import ExperimentConfig, RunSettings
from core.schema import VerificationCode
from verifier.compare import tolerance_for
from verifier.procedure import verify
from child.verification import make_run

SEED = 1234


def runs(test, path=None, iterations=1, optimizer=None):
    suite = get_suite("builtin")
    environ = {"EXPERIMENT_RUNNER_DEBUG_STACKS": "1"}
    if path:
        environ["EXPERIMENT_RUNNER_PERTURB_PATH"] = path
    stack = DebugPerturbStack(environ)
    exp = stack.planned(ExperimentConfig("cpu", None, "debug_perturb", None, test,
                                         optimizer=optimizer), environ)
    eager_exp = stack.reference_experiment(exp)
    load = lambda: suite.load("mlp", test, 4)  # noqa: E731
    settings = RunSettings()
    eager = make_run(load, lambda b: EagerStack().prepare(b, eager_exp, settings), SEED,
                     iterations)
    fp64 = make_run(load, lambda b: Fp64PreparedModel(b, eager_exp), SEED, iterations)
    experiment = make_run(load, lambda b: stack.prepare(b, exp, settings), SEED, iterations)
    return eager, fp64, experiment


def test_reference_experiment_is_eager_on_the_native_device():
    exp = ExperimentConfig("tpu", "PJRT", "openxla", None, "train", precision="bf16",
                           xla_flags="--x", stack="openxla")
    ref = OpenXlaStack().reference_experiment(exp)
    assert (ref.accelerator, ref.xla, ref.dynamo, ref.xla_flags) == ("cpu", None, None, None)
    assert (ref.test, ref.precision, ref.stack) == ("train", "bf16", "eager")


def test_fp64_reference_really_runs_in_float64():
    _, fp64, _ = runs("train")
    result = fp64()
    assert result["gradients"]["layers.0.weight"].dtype == torch.float64


@pytest.mark.parametrize("test,optimizer", [("eval", None), ("train", None), ("train", "sgd")])
def test_builtin_model_passes_and_a_perturbed_leaf_fails(test, optimizer):
    iterations = 2 if optimizer else 1  # two steps: the second sees updated weights
    eager, fp64, experiment = runs(test, iterations=iterations, optimizer=optimizer)
    tolerance = tolerance_for("fp32", test, "builtin")
    verdict = verify(eager, fp64, experiment, tolerance=tolerance)
    assert verdict.code is VerificationCode.PASS and verdict.details["method"] == "fp64", verdict.reason
    path = "output" if test == "eval" else "gradients['layers.4.bias']"
    eager, fp64, experiment = runs(test, path=path, iterations=iterations, optimizer=optimizer)
    verdict = verify(eager, fp64, experiment, tolerance=tolerance)
    assert verdict.code is VerificationCode.FAIL and verdict.details["path"] == path


@pytest.mark.e2e
def test_the_verifier_loads_models_that_drop_nothing(probed_compiler):
    """Timed models drop as the harness's do (PLBart's attention at p = 0.1), so two
    training steps differ and inductor's draws are not eager's; the verifier's models keep
    their draws at p = 1e-30, and inductor passes against eager."""
    import backends
    from core.config import ModelConfig
    from child.verification import verify_experiment

    suite = get_suite("huggingface", reduced=True)
    timed = suite.load("PLBartForCausalLM", "train", 2)
    inputs = timed.make_inputs(0)
    timed.module.train(True)
    assert not torch.equal(timed.module(**inputs.kwargs).logits,
                           timed.module(**inputs.kwargs).logits)
    model = ModelConfig("huggingface", "PLBartForCausalLM", reduced=True)
    experiment = ExperimentConfig("cpu", None, "inductor", None, "train", stack="dynamo",
                                  batch_size=2)
    verdict = verify_experiment(model, experiment, RunSettings(), suite,
                                backends.get_stack("dynamo"))
    assert verdict.code is VerificationCode.PASS, verdict.reason
