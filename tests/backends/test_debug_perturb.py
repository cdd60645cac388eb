import pytest
import torch

from backends.base import HostCapabilities
from backends.debug_perturb import DebugPerturbBackend, perturb_scale
from backends.debug_perturb_model import perturb, perturb_leaf
from models.base import BenchmarkModel, ModelInputs
from runner.config import ExperimentConfig, RunSettings
from tests.verifier.conftest import MLP, ManyOutputs, build
from verifier.codes import Code
from verifier.compare import tolerance_for
from verifier.procedure import verify

HOST = HostCapabilities(python="3.11", torch_version=torch.__version__)
ON = {"EXPERIMENT_RUNNER_DEBUG_STACKS": "1"}


def experiment(test="eval", accelerator="cpu", **kwargs):
    return ExperimentConfig(accelerator, None, "debug_perturb", None, test, **kwargs)


def test_selected_by_dynamo_name_and_valid_only_with_debug_stacks_on():
    assert DebugPerturbBackend().handles(experiment())
    assert not DebugPerturbBackend().handles(ExperimentConfig("cpu", "PJRT", "debug_perturb",
                                                              None, "eval"))
    reason = DebugPerturbBackend(environ={}).invalid_reason(experiment(), HOST)
    assert "EXPERIMENT_RUNNER_DEBUG_STACKS=1" in reason
    assert DebugPerturbBackend(environ=ON).invalid_reason(experiment(), HOST) is None
    assert "only on cpu" in DebugPerturbBackend(environ=ON).invalid_reason(
        experiment(accelerator="cuda"), HOST)
    bad = {**ON, "EXPERIMENT_RUNNER_PERTURB_SCALE": "big"}
    assert "EXPERIMENT_RUNNER_PERTURB_SCALE='big' is not a number" in (
        DebugPerturbBackend(environ=bad).invalid_reason(experiment(), HOST))


def test_child_environment_carries_the_perturbation():
    environ = {**ON, "EXPERIMENT_RUNNER_PERTURB_PATH": "[2]", "UNRELATED": "x"}
    assert DebugPerturbBackend(environ=environ).child_environment(experiment(), RunSettings()) == {
        "EXPERIMENT_RUNNER_DEBUG_STACKS": "1", "EXPERIMENT_RUNNER_PERTURB_PATH": "[2]"}
    assert perturb_scale({}) == 1e-2
    with pytest.raises(ValueError, match="'-1'"):
        perturb_scale({"EXPERIMENT_RUNNER_PERTURB_SCALE": "-1"})


def test_perturb_leaf_changes_direction_and_exact_kinds():
    x = torch.randn(100)
    y = perturb_leaf(x, 1e-2)
    relative = float((y - x).norm() / x.norm())
    assert 5e-3 < relative < 2e-2
    assert torch.equal(perturb_leaf(torch.tensor([1, 2]), 1e-2), torch.tensor([2, 2]))
    assert torch.equal(perturb_leaf(torch.tensor([True, False]), 1e-2), torch.tensor([False, False]))
    assert perturb_leaf(3, 1e-2) == 4 and perturb_leaf(True, 1e-2) is False
    with pytest.raises(ValueError, match="no leaf at path 'output\\[9\\]'"):
        perturb((x,), "output[9]", 1e-2)


def bench_of(factory, test):
    def make_inputs(seed):
        g = torch.Generator().manual_seed(seed)
        return ModelInputs((torch.randn(4, 32, generator=g),), {}, None)

    def loss_fn(output, inputs):
        first = output[0] if isinstance(output, tuple) else output
        return first.float().square().mean()

    return BenchmarkModel(factory.__name__, build(factory), make_inputs, loss_fn, 4)


def run_on(backend, factory, exp):
    def run():
        bench = bench_of(factory, exp.test)
        prepared = backend.prepare(bench, exp, RunSettings())
        result = prepared.step(prepared.inputs_to_device(bench.make_inputs(0)))
        return prepared.result_to_host(result)
    return run


@pytest.mark.parametrize("test,factory,path,named", [
    ("eval", ManyOutputs, "[2]['deep']['pair'][1]", "output[2]['deep']['pair'][1]"),
    ("eval", ManyOutputs, "[3].ids", "output[3].ids"),
    ("train", MLP, "gradients['layers.2.weight']", "gradients['layers.2.weight']"),
    ("train", MLP, "['loss']", "loss"),
])
def test_the_verifier_catches_the_perturbed_leaf(test, factory, path, named):
    exp = experiment(test)
    eager = run_on(DebugPerturbBackend(environ=ON), factory, exp)
    tolerance = tolerance_for("fp32", test)
    clean = verify(eager, None, eager, tolerance=tolerance)
    assert clean.code is Code.PASS, clean.reason
    backend = DebugPerturbBackend(environ={**ON, "EXPERIMENT_RUNNER_PERTURB_PATH": path})
    # Without a reference, and with eager itself standing in for the fp64 reference.
    for fp64 in (None, eager):
        verdict = verify(eager, fp64, run_on(backend, factory, exp), tolerance=tolerance)
        assert verdict.code is Code.FAIL
        assert verdict.details["path"] == named
