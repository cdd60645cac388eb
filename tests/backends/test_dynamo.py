"""The dynamo stack: inductor's modes, their compile arguments, labels and validity."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import backends
from backends.stacks.dynamo import DynamoStack, compile_arguments
from core.config import ExperimentConfig, ModelConfig, fingerprint
from core.host.machine import HostCapabilities
from verifier.tolerance import tolerance_for

HOST = HostCapabilities(python="3.11", torch_version=torch.__version__,
                        dynamo_backends=("inductor", "aot_eager"))


def compiled(dynamo="inductor", mode="default", accelerator="cpu"):
    experiment = ExperimentConfig(accelerator, None, dynamo, None, "eval", mode=mode)
    return DynamoStack().planned(experiment, {})


@pytest.mark.parametrize("mode, arguments", [
    ("default", {"backend": "inductor"}),
    ("cudagraphs", {"backend": "inductor", "options": {"triton.cudagraphs": True}}),
    ("dynamic", {"backend": "inductor", "dynamic": True}),
    ("max-autotune", {"backend": "inductor", "mode": "max-autotune-no-cudagraphs"}),
])
def test_each_mode_compiles_with_its_arguments(mode, arguments):
    assert compile_arguments(compiled(mode=mode)) == arguments


def test_the_models_inductor_settings_join_inductors_options_only():
    settings = {"emulate_precision_casts": True}
    assert compile_arguments(compiled(), settings) == {
        "backend": "inductor", "options": {"emulate_precision_casts": True}}
    autotuned = compile_arguments(compiled(mode="max-autotune"), settings)
    assert autotuned["options"]["emulate_precision_casts"] is True
    assert autotuned["options"]["max_autotune"] is True and "mode" not in autotuned
    assert compile_arguments(compiled("aot_eager", None), settings) == {"backend": "aot_eager"}


def test_labels_name_the_mode_except_the_default():
    stack = DynamoStack()
    assert stack.label(compiled()) == "inductor"
    assert stack.label(compiled(mode="cudagraphs")) == "inductor:cudagraphs"


def test_modes_belong_to_inductor_only_and_cudagraphs_to_cuda():
    stack = DynamoStack()
    assert stack.mode_reason(compiled(mode="dynamic")) is None
    aot = compiled("aot_eager", "default")
    assert aot.mode is None and stack.mode_reason(aot) is None  # no mode where there are none
    assert stack.mode_reason(compiled("aot_eager", "dynamic")) == \
        "mode=dynamic applies only to dynamo=inductor"
    assert "needs CUDA" in stack.invalid_reason(compiled(mode="cudagraphs"), HOST)
    eager = ExperimentConfig("cpu", None, None, None, "eval", mode="max-autotune")
    assert backends.invalid_reason(eager, HOST) == \
        "mode=max-autotune applies only to dynamo=inductor"


def test_the_mode_is_part_of_the_fingerprint():
    model = ModelConfig("builtin", "mlp")
    assert fingerprint(model, compiled(mode="default")) != fingerprint(model, compiled(mode="dynamic"))


def test_the_tolerance_names_the_matmul_precision_actually_used():
    high = ExperimentConfig("cuda", None, "inductor", None, "eval")
    strict = ExperimentConfig("cuda", None, "inductor", None, "eval", disable_tf32=True)
    assert (high.torch_matmul_precision(), strict.torch_matmul_precision()) == ("high", "highest")
    assert ExperimentConfig("cpu", None, None, None, "eval",
                            matmul_precision="default").torch_matmul_precision() == "medium"
    # The harness's tol whatever the matmul precision (eager runs under it too, and the
    # fp64 rule is a multiple of eager's own error); the verdict's rule names it.
    high_tolerance = tolerance_for("fp32", "eval", matmul_precision=high.torch_matmul_precision())
    strict_tolerance = tolerance_for("fp32", "eval",
                                     matmul_precision=strict.torch_matmul_precision())
    assert high_tolerance.tol == strict_tolerance.tol == 1e-4
    assert "matmul precision high" in high_tolerance.rule


def test_eager_and_dynamo_children_share_one_fork_server():
    """A sweep of eager and dynamo experiments starts one fork server, not two: eager's
    children start from dynamo's preload there, and neither stack adds to the children's
    shared environment. An eager-only sweep's server imports torch and dynamo's modules."""
    from backends import get_stack
    from runner.run.process.forkserver_client import server_key

    eager, dynamo = get_stack("eager"), get_stack("dynamo")
    experiment = ExperimentConfig("cpu", None, "inductor", None, "eval")
    environment = {"PATH": "/bin"}
    both = {eager.preload, dynamo.preload}
    assert server_key(eager.preload_in(both),
                      {**environment, **eager.child_environment(experiment)}) \
        == server_key(dynamo.preload_in(both),
                      {**environment, **dynamo.child_environment(experiment)})
    assert eager.preload_in({eager.preload}) == ("torch", "torch._dynamo")
    assert dynamo.preload_in({dynamo.preload}) == dynamo.preload


def test_eager_children_start_from_torch_and_dynamo_or_beside_dynamo_from_its_server():
    """Every child loads dynamo's modules before it counts its workload (child/worker.py): an
    eager server imports them too, for evaluations and training alike; beside dynamo
    experiments, dynamo's server (the compiler's too) serves the eager children."""
    from backends import get_stack

    eager, dynamo = get_stack("eager"), get_stack("dynamo")
    evaluation = ExperimentConfig("cpu", None, None, None, "eval")
    training = ExperimentConfig("cpu", None, None, None, "train")
    assert eager.preload_for(evaluation) == eager.preload_for(training) == ("torch", "torch._dynamo")
    alone = {eager.preload_for(evaluation)}
    assert eager.preload_in(alone) == ("torch", "torch._dynamo")
    compiled = ExperimentConfig("cpu", None, "inductor", None, "train")
    assert eager.preload_in(alone | {dynamo.preload_for(compiled)}) == dynamo.preload


def recorded_eval_graphs(precision: str) -> tuple[list, object]:
    """The graphs dynamo hands a backend for the builtin cnn's eval step, and the prepared
    model, as a timing child prepares it on the CPU."""
    from backends.stacks.dynamo import STACK
    from core.config import RunSettings
    from models import get_suite

    graphs = []

    def recording(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    name = f"test_dynamo_recorder_{precision}"
    torch._dynamo.register_backend(recording, name=name)
    experiment = ExperimentConfig("cpu", None, name, None, "eval", precision=precision)
    bench = get_suite("builtin").load("cnn", "eval", 2, seed=experiment.seed)
    prepared = STACK.prepare(bench, experiment, RunSettings())
    inputs = prepared.inputs_to_device(bench.make_inputs(experiment.seed))
    for _ in range(3):
        output = prepared.step(inputs)
    assert output.dtype == (torch.bfloat16 if precision == "amp" else torch.float32)
    return graphs, prepared


@pytest.mark.parametrize("precision, autocast_inside", [("amp", True), ("fp32", False)])
def test_inference_compiles_the_forward_under_autocast_as_one_frame(precision, autocast_inside):
    # As PyTorch's harness compiles its forward_pass: autocast is traced into the graph and
    # the module is called inside the compiled frame, so a call enters neither autocast nor
    # the model's nn.Module call machinery before dynamo's frame (benchmarks/cost/call_overhead.py).
    torch._dynamo.reset()
    graphs, prepared = recorded_eval_graphs(precision)
    assert len(graphs) == 1  # compiled once, then reused
    entered = [node for node in graphs[0].graph.nodes if "_enter_autocast" in str(node.target)]
    assert bool(entered) is autocast_inside
    assert isinstance(prepared.callable, torch.nn.Module)
    assert not isinstance(prepared.callable, torch._dynamo.eval_frame.OptimizedModule)


@pytest.mark.parametrize("mode, options", [
    ("default", {}), ("cudagraphs", {"triton.cudagraphs": True}), ("dynamic", {})])
def test_the_inductor_options_a_compile_applies_are_its_modes(mode, options):
    from backends.stacks.dynamo import inductor_options

    assert inductor_options(compile_arguments(compiled(mode=mode))) == options
    autotuned = inductor_options(compile_arguments(compiled(mode="max-autotune")))
    assert autotuned["max_autotune"] is True and "triton.cudagraphs" not in autotuned
    assert inductor_options(compile_arguments(compiled("aot_eager", None),
                                              {"freezing": True})) == {}


@pytest.mark.parametrize("dynamo, options, off_the_card", [
    ("inductor", {}, True),
    ("inductor", {"triton.cudagraphs": True}, True),
    ("aot_eager", {}, True),
    ("inductor", {"max_autotune": True}, False),
    ("inductor", {"freezing": True}, False),
    ("tvm", {}, False),
])
def test_a_gpus_gate_is_lent_only_while_compiling_runs_nothing_on_the_card(dynamo, options,
                                                                           off_the_card):
    import types

    import backends

    planned = ExperimentConfig("cuda", None, dynamo, None, "eval")
    experiment = dataclasses.replace(planned, stack=backends.stack_for(planned).name)
    prepared = types.SimpleNamespace(inductor_options=options)
    stack = backends.get_stack(experiment.stack)
    assert stack.compiles_off_the_card(experiment, prepared) is off_the_card
    # Stacks that do not say so keep the gate (XLA's compiles tune on the card).
    lazy = dataclasses.replace(planned, xla="PJRT", dynamo=None, stack="xla_lazy")
    assert backends.get_stack("xla_lazy").compiles_off_the_card(lazy, prepared) is False
