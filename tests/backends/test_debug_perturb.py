import pytest
import torch

import backends
from backends.base import DYNAMO_GRAPHS
from core.config import fingerprint
from observers import inapplicable_notes

from core.host.machine import HostCapabilities
from backends.stacks.debug_perturb import DebugPerturbStack, perturb_element, perturb_scale
from backends.runtimes.perturb import perturb, perturb_leaf
from models.base import BenchmarkModel, ModelInputs
from core.config import ExperimentConfig, ModelConfig, RunSettings
from tests.verifier.conftest import MLP, ManyOutputs, build
from core.schema import VerificationCode
from verifier.compare import tolerance_for
from verifier.procedure import verify

HOST = HostCapabilities(python="3.11", torch_version=torch.__version__)
ON = {"EXPERIMENT_RUNNER_DEBUG_STACKS": "1"}
MODEL = ModelConfig("builtin", "mlp")


def experiment(test="eval", accelerator="cpu", **kwargs):
    return ExperimentConfig(accelerator, None, "debug_perturb", None, test, **kwargs)


def test_selected_by_dynamo_name_and_valid_only_with_debug_stacks_on():
    assert DebugPerturbStack().handles(experiment())
    assert not DebugPerturbStack().handles(ExperimentConfig("cpu", "PJRT", "debug_perturb",
                                                              None, "eval"))
    reason = DebugPerturbStack(environ={}).invalid_reason(experiment(), HOST)
    assert "EXPERIMENT_RUNNER_DEBUG_STACKS=1" in reason
    assert DebugPerturbStack(environ=ON).invalid_reason(experiment(), HOST) is None
    assert "only on cpu" in DebugPerturbStack(environ=ON).invalid_reason(
        experiment(accelerator="cuda"), HOST)
    bad = {**ON, "EXPERIMENT_RUNNER_PERTURB_SCALE": "big"}
    stack = DebugPerturbStack(environ=bad)
    assert "EXPERIMENT_RUNNER_PERTURB_SCALE='big' is not a number" in (
        stack.invalid_reason(stack.planned(experiment(), bad), HOST))


def test_the_perturbation_is_planned_into_the_experiment_not_the_child_environment():
    environ = {**ON, "EXPERIMENT_RUNNER_PERTURB_PATH": "[2]", "UNRELATED": "x"}
    stack = DebugPerturbStack(environ=environ)
    planned = stack.planned(experiment(), environ)
    assert planned.stack == "debug_perturb"
    assert planned.option("perturb_path") == "[2]" and planned.option("perturb_scale") is None
    assert stack.child_environment(planned) == {}
    assert fingerprint(MODEL, planned) != fingerprint(MODEL, stack.planned(experiment(), ON))
    assert perturb_scale(None) == 1e-2
    with pytest.raises(ValueError, match="'-1'"):
        perturb_scale("-1")


def test_the_debug_stack_counts_as_eager_for_observers():
    settings = RunSettings(observe={"collect_dynamo_counters": True})
    stack = backends.stack_for(experiment())
    assert stack.name == "debug_perturb"
    assert DYNAMO_GRAPHS not in stack.capabilities.features
    (note,) = inapplicable_notes(stack, settings)
    assert note.startswith("--collect-dynamo-counters does not apply to the debug_perturb stack")


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


def test_one_element_can_be_perturbed_alone():
    x = torch.tensor([[0.5, -0.018], [0.8, 1.0]])
    y = perturb_leaf(x, 0.3, element=1)
    assert torch.equal(y.view(-1)[[0, 2, 3]], x.view(-1)[[0, 2, 3]])
    assert float(y[0, 1]) == pytest.approx(-0.018 * 1.3)
    with pytest.raises(ValueError, match="element 4 of a tensor of 4 elements"):
        perturb_leaf(x, 0.3, element=4)
    assert perturb_element(None) is None and perturb_element("7") == 7
    stack = DebugPerturbStack(environ={**ON, "EXPERIMENT_RUNNER_PERTURB_ELEMENT": "-1"})
    assert "EXPERIMENT_RUNNER_PERTURB_ELEMENT='-1' must not be negative" in (
        stack.invalid_reason(stack.planned(experiment(), stack.environ), HOST))


def bench_of(factory, test):
    def make_inputs(seed):
        g = torch.Generator().manual_seed(seed)
        return ModelInputs((torch.randn(4, 32, generator=g),), {}, None)

    def loss_fn(output, inputs):
        first = output[0] if isinstance(output, tuple) else output
        return first.float().square().mean()

    return BenchmarkModel(factory.__name__, build(factory), make_inputs, loss_fn, 4)


def run_on(stack, factory, exp):
    exp = stack.planned(exp, stack.environ)

    def run():
        bench = bench_of(factory, exp.test)
        prepared = stack.prepare(bench, exp, RunSettings())
        result = prepared.step(prepared.inputs_to_device(bench.make_inputs(0)))
        return prepared.result_to_host(result)
    return run


@pytest.mark.parametrize("test,factory,path,named,scale,cosine", [
    ("eval", ManyOutputs, "[2]['deep']['pair'][1]", "output[2]['deep']['pair'][1]", None, True),
    ("eval", ManyOutputs, "[3].ids", "output[3].ids", None, False),
    ("train", MLP, "gradients['layers.2.weight']", "gradients['layers.2.weight']", "0.5", True),
    ("train", MLP, "['loss']", "loss", None, False),
])
def test_the_verifier_catches_the_perturbed_leaf(test, factory, path, named, scale, cosine):
    exp = experiment(test)
    eager = run_on(DebugPerturbStack(environ=ON), factory, exp)
    tolerance = tolerance_for("fp32", test)
    clean = verify(eager, None, eager, tolerance=tolerance)
    assert clean.code is VerificationCode.PASS, clean.reason
    perturbed = {**ON, "EXPERIMENT_RUNNER_PERTURB_PATH": path}
    if scale:  # a gradient of about 1e-3: 1% of it is within allclose's atol of 1e-4
        perturbed["EXPERIMENT_RUNNER_PERTURB_SCALE"] = scale
    # With eager itself standing in for the fp64 reference (cast to float64, as the harness
    # casts its reference). Without a reference cosine similarity decides, as in the
    # harness: it misses a +1 in an integer leaf and a scalar's change (a one-element
    # cosine is 1), and catches noise of half the leaf's size.
    runs = [(eager, perturbed)]
    if cosine:
        runs.append((None, {**perturbed, "EXPERIMENT_RUNNER_PERTURB_SCALE": "0.5"}))
    for fp64, environ in runs:
        backend = DebugPerturbStack(environ=environ)
        verdict = verify(eager, fp64, run_on(backend, factory, exp), tolerance=tolerance)
        assert verdict.code is VerificationCode.FAIL
        assert verdict.details["path"] == named
