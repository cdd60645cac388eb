"""The TorchBench adapter, against a stand-in package that follows TorchBench's model API."""

from __future__ import annotations

import pytest

from models import get_suite
from models.base import SuiteUnavailableError, UnknownModelError
from models.suites.torchbench import TorchBenchSuite
from tests.models.conftest import FAKE_TORCHBENCH, eval_forward, run_listing_without_torch, train_step

STAND_IN_MODELS = ["tiny_dict_eval_only", "tiny_mlp"]


def suite_at(path) -> TorchBenchSuite:
    return TorchBenchSuite(torchbench_dir=str(path))


def test_without_torchbench_the_error_says_how_to_get_it(no_torchbench):
    suite = get_suite("torchbench")
    with pytest.raises(SuiteUnavailableError) as caught:
        suite.model_names()
    message = str(caught.value)
    for hint in ("git clone", "pytorch/benchmark", "install.py", "--torchbench-dir"):
        assert hint in message
    assert "TORCHBENCH_DIR" not in message  # the runner, not the suite, reads the environment
    with pytest.raises(SuiteUnavailableError):
        suite.load("tiny_mlp", "eval", 1)


def test_a_directory_without_torchbenchmark_is_named_in_the_error(tmp_path):
    with pytest.raises(SuiteUnavailableError, match=str(tmp_path)):
        suite_at(tmp_path).model_names()


def test_lists_model_folders_of_the_checkout(fake_torchbench_dir):
    suite = suite_at(fake_torchbench_dir)
    # Private helpers and folders without __init__.py are not models.
    assert suite.model_names() == STAND_IN_MODELS


def test_the_package_folder_is_accepted(fake_torchbench_dir):
    package_dir = fake_torchbench_dir / "torchbenchmark"
    assert suite_at(package_dir).model_names() == STAND_IN_MODELS


def test_the_environment_is_not_read(no_torchbench, monkeypatch):
    monkeypatch.setenv("TORCHBENCH_DIR", str(FAKE_TORCHBENCH))
    with pytest.raises(SuiteUnavailableError):
        get_suite("torchbench").model_names()
    given = get_suite("torchbench", torchbench_dir=str(FAKE_TORCHBENCH))
    assert given.model_names() == STAND_IN_MODELS


def test_default_batch_sizes_are_read_from_the_model_source(fake_torchbench_dir):
    suite = suite_at(fake_torchbench_dir)
    assert suite.default_batch_size("tiny_mlp") == 4  # DEFAULT_EVAL_BSIZE
    assert suite.default_batch_size("tiny_dict_eval_only") == 3
    with pytest.raises(UnknownModelError, match="resnet50"):
        suite.default_batch_size("resnet50")


@pytest.mark.e2e
def test_listing_does_not_import_torch():
    listed = run_listing_without_torch("torchbench", torchbench_dir=str(FAKE_TORCHBENCH))
    assert listed["heavy"] == []
    assert listed["names"] == STAND_IN_MODELS
    assert listed["sizes"] == {"tiny_dict_eval_only": 3, "tiny_mlp": 4}


def test_skip_reason_comes_from_metadata(fake_torchbench_dir):
    suite = suite_at(fake_torchbench_dir)
    reason = suite.skip_reason("tiny_dict_eval_only", "train")
    assert reason and "tiny_dict_eval_only" in reason and "train" in reason
    # An entry that also names a device does not skip the test everywhere.
    assert suite.skip_reason("tiny_dict_eval_only", "eval") is None
    assert suite.skip_reason("tiny_mlp", "train") is None


def test_eval_model_with_positional_inputs(fake_torchbench_dir):
    bench = suite_at(fake_torchbench_dir).load("tiny_mlp", "eval", 5)
    assert bench.batch_size == 5
    assert tuple(eval_forward(bench).shape) == (5, 3)


def test_train_step_uses_the_mean_of_outputs_as_loss(fake_torchbench_dir):
    import torch

    bench = suite_at(fake_torchbench_dir).load("tiny_mlp", "train", None)
    assert bench.batch_size == 2  # the model's own training default
    loss, grads = train_step(bench)
    output = bench.module(*bench.make_inputs(0).args)
    assert torch.allclose(loss, output.mean())
    assert all(g is not None for g in grads.values())


def test_keyword_inputs_and_tuple_outputs(fake_torchbench_dir):
    import torch

    from models.builders.torchbench import reduce_to_scalar_loss

    bench = suite_at(fake_torchbench_dir).load("tiny_dict_eval_only", "eval", None)
    inputs = bench.make_inputs(0)
    assert inputs.args == () and set(inputs.kwargs) == {"tokens", "scale"}
    first, second, tokens = eval_forward(bench)
    # Integer outputs carry no gradient and are left out of the loss.
    expected = (first.mean() + second.mean()) / 2
    assert torch.allclose(reduce_to_scalar_loss((first, second, tokens)), expected)


def test_inputs_are_the_same_for_every_call(fake_torchbench_dir):
    import torch

    bench = suite_at(fake_torchbench_dir).load("tiny_mlp", "eval", None)
    one, two = bench.make_inputs(0), bench.make_inputs(0)
    assert torch.equal(one.args[0], two.args[0])
    assert one.args[0] is not two.args[0]  # copies: a step cannot change the next inputs


def test_unsupported_test_raises_naming_the_model(fake_torchbench_dir):
    with pytest.raises(NotImplementedError, match="tiny_dict_eval_only.*train"):
        suite_at(fake_torchbench_dir).load("tiny_dict_eval_only", "train", None)


def test_reduce_to_scalar_loss_prefers_an_outputs_loss():
    import torch

    from models.builders.torchbench import reduce_to_scalar_loss

    class Output(dict):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.loss = kwargs.get("loss")

    value = Output(loss=torch.tensor(2.5), logits=torch.ones(2, 2))
    assert float(reduce_to_scalar_loss(value)) == 2.5
    assert float(reduce_to_scalar_loss({"a": torch.ones(3), "b": torch.zeros(2)})) == 0.5
    with pytest.raises(TypeError):
        reduce_to_scalar_loss({"ids": torch.ones(2, dtype=torch.long)})
