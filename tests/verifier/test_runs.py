import pytest
import torch

from backends.debug_perturb import DebugPerturbBackend
from backends.eager import EagerBackend
from models import get_suite
from runner.config import ExperimentConfig, RunSettings
from verifier.codes import Code
from verifier.compare import tolerance_for
from verifier.procedure import verify
from verifier.runs import Fp64PreparedModel, make_run, reference_experiment

SEED = 1234


def runs(test, path=None, iterations=1, optimizer=None):
    suite = get_suite("builtin")
    exp = ExperimentConfig("cpu", None, "debug_perturb", None, test, optimizer=optimizer)
    eager_exp = reference_experiment(exp)
    environ = {"EXPERIMENT_RUNNER_DEBUG_STACKS": "1"}
    if path:
        environ["EXPERIMENT_RUNNER_PERTURB_PATH"] = path
    load = lambda: suite.load("mlp", test, 4)  # noqa: E731
    settings = RunSettings()
    eager = make_run(load, lambda b: EagerBackend().prepare(b, eager_exp, settings), SEED,
                     iterations)
    fp64 = make_run(load, lambda b: Fp64PreparedModel(b, exp), SEED, iterations)
    experiment = make_run(load, lambda b: DebugPerturbBackend(environ).prepare(b, exp, settings),
                          SEED, iterations)
    return eager, fp64, experiment


def test_reference_experiment_is_eager_on_the_native_device():
    exp = ExperimentConfig("tpu", "PJRT", "openxla", None, "train", precision="bf16",
                           xla_flags="--x")
    ref = reference_experiment(exp)
    assert (ref.accelerator, ref.xla, ref.dynamo, ref.xla_flags) == ("cpu", None, None, None)
    assert (ref.test, ref.precision) == ("train", "bf16")


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
    assert verdict.code is Code.PASS and verdict.details["method"] == "fp64", verdict.reason
    path = "output" if test == "eval" else "gradients['layers.4.bias']"
    eager, fp64, experiment = runs(test, path=path, iterations=iterations, optimizer=optimizer)
    verdict = verify(eager, fp64, experiment, tolerance=tolerance)
    assert verdict.code is Code.FAIL and verdict.details["path"] == path
