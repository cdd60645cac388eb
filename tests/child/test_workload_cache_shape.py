"""The workload cache's entries are untrusted (issue 54): an entry whose FLOP count would make
TFLOP/s overflow, or whose inputs are not a list, does not fit its shape; it is set aside and
the signature counted again, never copied into the line as cached."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from core.config import ExperimentConfig, ModelConfig  # noqa: E402
from core.files.side_files import ShapeError  # noqa: E402
from models import get_suite  # noqa: E402
from child import workload as w  # noqa: E402

EAGER_EVAL = ExperimentConfig("cpu", None, None, None, "eval")


def counted(tmp_path) -> tuple[dict, list]:
    """A real signature of the builtin mlp, cached in tmp_path, and its cache entry."""
    suite, model = get_suite("builtin"), ModelConfig("builtin", "mlp")
    first = w.experiment_workload(suite, model, EAGER_EVAL, 4, folder=tmp_path)
    assert first["cached"] is False
    [entry] = tmp_path.glob("*.json")
    return first, entry


def again(tmp_path) -> dict:
    return w.experiment_workload(get_suite("builtin"), ModelConfig("builtin", "mlp"),
                                 EAGER_EVAL, 4, folder=tmp_path)


@pytest.mark.parametrize("change, reason", [
    ({"flops_per_iteration": 1.7e308}, "flops_per_iteration"),    # defect 9
    ({"flops_per_iteration": 2**64}, "flops_per_iteration"),
    ({"flops_per_iteration": -3}, "flops_per_iteration"),
    ({"flops_per_iteration": 1.5}, "flops_per_iteration"),
    ({"inputs": "oops"}, "inputs"),                               # rough edge
    ({"inputs": [5]}, "inputs"),
    ({"parameters": "many"}, "parameters"),
    ({"input_bytes": "x"}, "input_bytes"),
    ({"outputs": [1]}, "outputs"),
])
def test_an_entry_that_does_not_fit_is_set_aside_and_counted_again(tmp_path, change, reason):
    first, entry = counted(tmp_path)
    stored = json.loads(entry.read_text())
    stored["workload"].update(change)
    entry.write_text(json.dumps(stored))
    signature = again(tmp_path)
    assert signature["cached"] is False
    assert reason in signature["cache_warning"] and "set aside" in signature["cache_warning"]
    assert signature["flops_per_iteration"] == first["flops_per_iteration"]
    assert signature["inputs"] == first["inputs"]
    assert again(tmp_path)["cached"] is True  # rebuilt


def test_an_entry_this_runner_wrote_fits():
    workload = {"flops_per_iteration": 10**9, "parameters": {"count": 1, "tensors": 1,
                                                             "bytes": 4, "dtypes": {"float32": 1},
                                                             "requires_grad": 1},
                "buffers": {"count": 0, "tensors": 0, "bytes": 0, "dtypes": {}},
                "inputs": [{"name": "args[0]", "bytes": 64}], "weight_bytes": 4,
                "input_bytes": 64, "mode": "eval", "outputs": ["output: tensor [2] float32"]}
    assert w.cache_entry_shape({"key": {}, "workload": workload})["workload"] == workload
    with pytest.raises(ShapeError, match="not a whole number"):
        w.workload_shape({**workload, "flops_per_iteration": 1.7e308})
