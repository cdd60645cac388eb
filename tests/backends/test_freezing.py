"""--freezing: inductor's freezing for inference, an identity switch of the field table."""

from unittest import mock

import pytest

from backends.stacks.dynamo import DynamoStack, compile_arguments
from core.config import ExperimentConfig, ModelConfig, RunSettings, fingerprint
from core.host.machine import HostCapabilities
from models import get_suite
from runner.plan.matrix import MatrixRequest, build_plan
from runner.plan.parser import build_parser, matrix_request

HOST = HostCapabilities(torch_version="2.9.0", dynamo_backends=("inductor",),
                        packages={"torch": "2.9.0"})
INDUCTOR = ExperimentConfig("cpu", None, "inductor", None, "eval")


def test_the_flag_plans_freezing_for_inductor_inference_only():
    args = build_parser().parse_args(["--accelerator=cpu", "--xla=None", "--dynamo=None",
                                      "--dynamo=inductor", "--test=eval", "--test=train",
                                      "--freezing"])
    plan = build_plan(get_suite("builtin"), matrix_request(args), HOST)
    frozen = {(p.experiment.dynamo, p.experiment.test): p.experiment.freezing
              for p in plan.experiments}
    assert frozen == {(None, "eval"): False, (None, "train"): False,
                      ("inductor", "eval"): True, ("inductor", "train"): False}


def test_freezing_is_identity_and_compiles_with_inductors_option():
    frozen = ExperimentConfig("cpu", None, "inductor", None, "eval", freezing=True)
    model = ModelConfig("builtin", "mlp")
    assert fingerprint(model, frozen) != fingerprint(model, INDUCTOR)
    assert compile_arguments(frozen) == {"backend": "inductor", "options": {"freezing": True}}
    autotuned = compile_arguments(ExperimentConfig("cpu", None, "inductor", None, "eval",
                                                   freezing=True, mode="max-autotune"))
    assert "mode" not in autotuned and autotuned["options"]["freezing"] is True
    assert autotuned["options"]["max_autotune"] is True


@pytest.mark.e2e
def test_inductor_freezes_the_weights_only_when_asked(probed_compiler):
    torch = pytest.importorskip("torch")
    from torch._inductor import freezing

    bench = get_suite("builtin").load("mlp", "eval", 2)
    for asked in (False, True):
        torch._dynamo.reset()
        experiment = ExperimentConfig("cpu", None, "inductor", None, "eval", freezing=asked)
        with mock.patch.object(freezing, "freeze", wraps=freezing.freeze) as freeze:
            prepared = DynamoStack().prepare(bench, experiment, RunSettings())
            prepared.step(prepared.inputs_to_device(bench.make_inputs(0)))
        assert freeze.called is asked
    torch._dynamo.reset()


@pytest.mark.e2e
def test_a_models_inductor_settings_reach_the_compile(probed_compiler):
    """A model's inductor_settings (the harness's per-model ones) are compiled with: here
    freezing, whose call shows, on a model that asks for it and an experiment that does not."""
    import dataclasses

    torch = pytest.importorskip("torch")
    from torch._inductor import freezing

    plain = get_suite("builtin").load("mlp", "eval", 2)
    for settings in ({}, {"freezing": True}):
        torch._dynamo.reset()
        bench = dataclasses.replace(plain, inductor_settings=settings)
        with mock.patch.object(freezing, "freeze", wraps=freezing.freeze) as freeze:
            prepared = DynamoStack().prepare(bench, INDUCTOR, RunSettings())
            prepared.step(prepared.inputs_to_device(bench.make_inputs(0)))
        assert freeze.called is bool(settings)
    torch._dynamo.reset()


def test_a_request_can_ask_for_it_by_name():
    request = MatrixRequest.of(accelerator=("cpu",), dynamo=("inductor",), test=("eval",),
                               xla=(None,), freezing=True)
    (planned,) = [p for p in build_plan(get_suite("builtin"), request, HOST).experiments
                  if p.model.model_name == "mlp"]
    assert planned.experiment.freezing is True
