"""--filter-by-single-graph: torch.compile(fullgraph=True) fails a model dynamo would split."""

import pytest

torch = pytest.importorskip("torch")

from backends.stacks.dynamo import DynamoStack  # noqa: E402
from core.config import ExperimentConfig, RunSettings  # noqa: E402
from models.base import BenchmarkModel, ModelInputs  # noqa: E402


class Breaking(torch.nn.Module):
    def forward(self, x):
        x = x.sin()
        torch._dynamo.graph_break()
        return x.cos()


def bench():
    return BenchmarkModel("breaking", Breaking(), lambda seed: ModelInputs((torch.ones(4),), {}),
                          None, 4)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_a_graph_break_fails_only_with_fullgraph():
    for fullgraph in (False, True):
        torch._dynamo.reset()  # compiled frames are cached by code object
        experiment = ExperimentConfig("cpu", None, "eager", None, "eval", fullgraph=fullgraph)
        prepared = DynamoStack().prepare(bench(), experiment, RunSettings())
        inputs = prepared.inputs_to_device(bench().make_inputs(0))
        if fullgraph:
            with pytest.raises(Exception, match="(?i)graph.?break"):
                prepared.step(inputs)
        else:
            assert torch.allclose(prepared.step(inputs), torch.ones(4).sin().cos())
