"""The torch runtime's prepared model (backends/runtimes/torch_device.py): settling after the
warm-up stops inductor's compile workers, which would otherwise share the timed runs' cores."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
psutil = pytest.importorskip("psutil")

from backends.runtimes.torch_device import TorchPreparedModel  # noqa: E402
from core.config import ExperimentConfig  # noqa: E402
from models.base import BenchmarkModel, ModelInputs  # noqa: E402


def linear_model() -> TorchPreparedModel:
    bench = BenchmarkModel("linear", torch.nn.Linear(4, 4),
                           lambda seed: ModelInputs((torch.randn(2, 4),), {}), None, 2)
    experiment = ExperimentConfig("cpu", None, "inductor", None, "eval")
    return TorchPreparedModel(bench, experiment, torch.device("cpu"))


def new_children(known: set[int]) -> list[psutil.Process]:
    return [child for child in psutil.Process().children(recursive=True)
            if child.pid not in known and child.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.e2e
def test_settle_shuts_down_the_compile_workers_still_starting():
    from torch._inductor.async_compile import (
        AsyncCompile, get_compile_threads, shutdown_compile_workers,
    )

    if get_compile_threads() <= 1:
        pytest.skip("inductor starts no compile workers with one compile thread")
    prepared = linear_model()
    known = {child.pid for child in psutil.Process().children(recursive=True)}
    try:
        # What inductor does before it compiles for a GPU: start the pool, then wake it.
        AsyncCompile.warm_pool()
        AsyncCompile.wakeup()
        assert new_children(known), "the compile worker pool did not start"
        prepared.settle()
        assert new_children(known) == []
    finally:
        shutdown_compile_workers()


def test_settle_without_inductor_loaded_does_nothing(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "torch._inductor.async_compile", raising=False)
    known = {child.pid for child in psutil.Process().children(recursive=True)}
    linear_model().settle()
    assert "torch._inductor.async_compile" not in sys.modules
    assert new_children(known) == []


def compiled_training_graphs(precision: str) -> list:
    """The graphs dynamo hands its backend for one compiled training iteration of reduced
    DistilBertForMaskedLM (a language model: its output holds logits over the vocabulary)."""
    from models import get_suite

    graphs = []

    def recording_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    bench = get_suite("huggingface", reduced=True).load("DistilBertForMaskedLM", "train", 2)
    experiment = ExperimentConfig("cpu", None, "inductor", None, "train", precision=precision)
    torch._dynamo.reset()
    try:
        prepared = TorchPreparedModel(
            bench, experiment, torch.device("cpu"),
            compile_iteration=lambda function: torch.compile(function, backend=recording_backend))
        loss = prepared.step(prepared.inputs_to_device(bench.make_inputs(experiment.seed)))
    finally:
        torch._dynamo.reset()
    assert loss.dim() == 0 and torch.isfinite(loss)
    return graphs


def graph_outputs(graph_module) -> list:
    output = next(node for node in graph_module.graph.nodes if node.op == "output")
    return [value.meta["example_value"] for value in output.args[0]]


@pytest.mark.e2e
@pytest.mark.parametrize("precision", ["amp", "fp32"])
def test_the_compiled_training_graph_returns_the_loss_alone(precision):
    # As PyTorch's harness compiles its iteration: autocast inside the graph, and nothing
    # but the loss leaves it. Were the model's output (logits over the whole vocabulary)
    # to leave it as well, the compiled step would write and keep it: ours did, by entering
    # autocast outside the graph, and held 6 GB more than the harness on DistilBert.
    graphs = compiled_training_graphs(precision)
    model_graph = next(graph for graph in graphs
                       if any(node.op == "call_module" or "linear" in str(node.target)
                              for node in graph.graph.nodes))
    outputs = graph_outputs(model_graph)
    assert [tuple(value.shape) for value in outputs] == [()], \
        f"the graph returns {[tuple(value.shape) for value in outputs]}"
    entered = [node for node in model_graph.graph.nodes if "_enter_autocast" in str(node.target)]
    assert len(entered) == 1
    assert entered[0].args[2] is (precision == "amp"), entered[0].args
