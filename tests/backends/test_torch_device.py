"""The torch runtime's prepared model (backends/runtimes/torch_device.py): inductor's compile
workers start on the child's cores before its main thread is pinned for the cold start, and
settling after the warm-up stops them, as they would otherwise share the timed runs' cores."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
psutil = pytest.importorskip("psutil")

from backends.runtimes.torch_device import TorchPreparedModel, to_cpu  # noqa: E402
from core.config import ExperimentConfig  # noqa: E402
from models.base import BenchmarkModel, ModelInputs  # noqa: E402
from tests.fixtures.compiled_graphs import (compiled_training_graphs, model_graph,  # noqa: E402
                                            output_shapes)
from verifier.tree import flatten  # noqa: E402


def linear_model(dynamo: str = "inductor") -> TorchPreparedModel:
    bench = BenchmarkModel("linear", torch.nn.Linear(4, 4),
                           lambda seed: ModelInputs((torch.randn(2, 4),), {}), None, 2)
    experiment = ExperimentConfig("cpu", None, dynamo, None, "eval")
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


@pytest.mark.e2e
def test_compile_workers_started_early_keep_every_core_of_the_pinned_thread():
    import os

    from torch._inductor.async_compile import get_compile_threads, shutdown_compile_workers

    cores = sorted(os.sched_getaffinity(0))
    if get_compile_threads() <= 1 or len(cores) < 2:
        pytest.skip("needs two cores and inductor's compile workers")
    known = {child.pid for child in psutil.Process().children(recursive=True)}
    try:
        linear_model().start_background_work()
        workers = new_children(known)
        assert workers, "the compile worker pool did not start"
        os.sched_setaffinity(0, {cores[0]})  # as the core picker pins the cold start's thread
        assert all(sorted(worker.cpu_affinity()) == cores for worker in workers)
    finally:
        os.sched_setaffinity(0, set(cores))
        shutdown_compile_workers()


def test_no_compile_workers_start_early_for_eager():
    known = {child.pid for child in psutil.Process().children(recursive=True)}
    linear_model(dynamo=None).start_background_work()
    assert new_children(known) == []


def test_settle_without_inductor_loaded_does_nothing(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "torch._inductor.async_compile", raising=False)
    known = {child.pid for child in psutil.Process().children(recursive=True)}
    linear_model().settle()
    assert "torch._inductor.async_compile" not in sys.modules
    assert new_children(known) == []


@pytest.mark.e2e
@pytest.mark.parametrize("precision", ["amp", "fp32"])
def test_the_compiled_training_graph_returns_the_loss_alone(precision):
    # As PyTorch's harness compiles its iteration: autocast inside the graph, and nothing
    # but the loss leaves it. Were the model's output (logits over the whole vocabulary)
    # to leave it as well, the compiled step would write and keep it: ours did, by entering
    # autocast outside the graph, and held 6 GB more than the harness on DistilBert.
    # Without amp no autocast at all, as the harness's nullcontext (a disabled one made a
    # graph of its own after each break inside it).
    graphs = compiled_training_graphs("huggingface", "DistilBertForMaskedLM", precision)
    graph = model_graph(graphs)
    shapes = output_shapes(graph)
    assert shapes == [()], f"the graph returns {shapes}"
    entered = [node for node in graph.graph.nodes if "_enter_autocast" in str(node.target)]
    assert len(entered) == (1 if precision == "amp" else 0), [node.args for node in entered]
    assert all(node.args[2] is True for node in entered), [node.args for node in entered]


@pytest.mark.parametrize("test, precision, grad, autocast", [
    ("eval", "fp32", False, False), ("eval", "amp", False, True),
    ("train", "amp", True, True), ("train", "bf16", True, False)])
def test_the_forward_context_is_the_grad_mode_and_autocast_of_the_iteration(test, precision,
                                                                            grad, autocast):
    bench = BenchmarkModel("linear", torch.nn.Linear(4, 4),
                           lambda seed: ModelInputs((torch.randn(2, 4),), {}), None, 2)
    experiment = ExperimentConfig("cpu", None, None, None, test, precision=precision)
    prepared = TorchPreparedModel(bench, experiment, torch.device("cpu"))
    with prepared.forward_context():
        assert torch.is_grad_enabled() is grad
        assert torch.is_autocast_enabled("cpu") is autocast
        if autocast:
            assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")


# Results brought to the host for the verifier (backends/runtimes/torch_device.to_cpu).
class Layer:
    def __init__(self, keys: torch.Tensor) -> None:
        self.keys, self.values, self.is_initialized = keys, keys * 2, True
        self.device = keys.device


class Cache:
    """Like a transformers cache: an object, not a container, holding tensors in layers."""

    def __init__(self, keys: torch.Tensor) -> None:
        self.layers = [Layer(keys), Layer(keys + 1)]
        self.offloading = False


def test_an_object_holding_tensors_becomes_the_mapping_of_those_attributes():
    keys = torch.arange(4.0)
    host = to_cpu({"logits": keys, "cache": Cache(keys)})
    assert set(host) == {"logits", "cache"}
    assert set(host["cache"]) == {"layers"}
    assert set(host["cache"]["layers"][1]) == {"keys", "values"}
    assert torch.equal(host["cache"]["layers"][1]["values"], (keys + 1) * 2)
    # So two runs' caches compare leaf by leaf (tensors), not by the objects' identity.
    leaves = flatten(to_cpu(Cache(keys)))
    assert len(leaves) == 4 and all(isinstance(leaf, torch.Tensor) for _, leaf in leaves)


def test_objects_without_tensors_stay_as_they_are():
    marker = object()
    assert to_cpu({"flag": marker})["flag"] is marker
    assert to_cpu(torch.float32) is torch.float32
