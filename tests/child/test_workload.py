"""The workload signature (child/workload.py): what one iteration runs, counted on
meta tensors and cached."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from core.config import ExperimentConfig, ModelConfig  # noqa: E402
from core.files.side_files import ShapeError  # noqa: E402
from models import get_suite  # noqa: E402
from child import workload as w  # noqa: E402


def experiment(test: str, accelerator: str = "cpu", **values) -> ExperimentConfig:
    return ExperimentConfig(accelerator, None, "inductor", None, test, **values)


def linear_flops(module: torch.nn.Module, batch: int) -> list[int]:
    """2 * batch * in * out for each Linear, in order."""
    return [2 * batch * layer.in_features * layer.out_features
            for layer in module.modules() if isinstance(layer, torch.nn.Linear)]


def test_the_versions_in_the_key_are_the_installed_ones_and_none_for_a_missing_package(
        monkeypatch):
    from importlib import metadata

    from core import packages

    expected = {}
    for package in w.VERSIONED_PACKAGES:
        try:
            expected[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            expected[package] = None
    assert w.versions() == expected
    assert set(w.VERSIONED_PACKAGES) <= set(packages.PROBED_PACKAGES)
    monkeypatch.setattr(w, "installed_packages", lambda: {"torch": "9.9"})
    assert w.versions() == {"torch": "9.9", "transformers": None, "timm": None}


def test_eval_counts_the_forward_of_every_layer():
    suite = get_suite("builtin")
    bench = suite.load("mlp", "eval", None)
    found = w.our_signature(suite, "mlp", experiment("eval"), None)
    assert found["flops_per_iteration"] == sum(linear_flops(bench.module, bench.batch_size))
    assert found["mode"] == "eval" and found["optimizer"] is None and found["loss"] is None
    assert found["parameters"]["count"] == sum(p.numel() for p in bench.module.parameters())
    assert found["parameters"]["dtypes"] == {"float32": found["parameters"]["count"]}
    assert found["weight_bytes"] == 4 * found["parameters"]["count"]


def test_training_adds_the_backward():
    """Backward costs the weight gradients of every layer and the input gradients of every
    layer but the first (its input needs none)."""
    suite = get_suite("builtin")
    bench = suite.load("mlp", "train", None)
    forward = linear_flops(bench.module, bench.batch_size)
    found = w.our_signature(suite, "mlp", experiment("train"), None)
    assert found["flops_per_iteration"] == 2 * sum(forward) + sum(forward[1:])
    assert found["requires_grad"] == "parameters"
    assert found["loss"].startswith("cross_entropy_loss")
    assert found["iteration_steps"] == ["zero grad", "forward", "loss", "backward"]


def test_inputs_say_shape_dtype_layout_and_kind_of_values():
    found = w.our_signature(get_suite("builtin"), "mlp", experiment("train"), 8)
    images, labels = found["inputs"]
    assert (images["name"], images["shape"], images["dtype"]) == ("args[0]", [8, 256], "float32")
    assert images["memory_format"] == "contiguous"
    assert images["values"]["kind"] == "normalised floats"
    assert labels["name"] == "targets" and labels["values"]["kind"] == "integers"
    assert 0 <= labels["values"]["min"] <= labels["values"]["max"] <= 9
    assert found["input_bytes"] == 8 * 256 * 4 + 8 * 8


def test_precision_changes_the_dtypes_not_the_count():
    suite = get_suite("builtin")
    full = w.our_signature(suite, "mlp", experiment("eval"), None)
    half = w.our_signature(suite, "mlp", experiment("eval", precision="bf16"), None)
    assert half["parameters"]["dtypes"] == {"bfloat16": full["parameters"]["count"]}
    assert half["inputs"][0]["dtype"] == "bfloat16"
    assert half["flops_per_iteration"] == full["flops_per_iteration"]
    amp = w.our_signature(suite, "mlp", experiment("eval", accelerator="cuda", precision="amp"), None)
    assert amp["autocast_dtype"] == "float16"


def test_the_harness_optimizer_on_cuda_and_none_elsewhere():
    suite = get_suite("builtin")
    on_cuda = w.our_signature(suite, "mlp", experiment("train", "cuda", optimizer="harness"), None)
    assert on_cuda["optimizer"] == {"name": "Adam", "lr": 0.01, "capturable": True,
                                    "foreach": True, "compiled_step": True}
    assert on_cuda["iteration_steps"][-1] == "optimizer step"
    on_cpu = w.our_signature(suite, "mlp", experiment("train", "cpu", optimizer="harness"), None)
    assert on_cpu["optimizer"] is None


def test_memory_formats():
    image = torch.empty(2, 3, 8, 8, device="meta")
    assert w.memory_format(image) == "contiguous"
    assert w.memory_format(image.contiguous(memory_format=torch.channels_last)) == "channels_last"
    assert w.memory_format(image.transpose(2, 3)) == "strided"


def test_a_model_that_reads_values_is_counted_on_fake_tensors():
    """Code reading a value cannot run on meta tensors; fake ones answer through the
    libraries' tracing paths, and the count says where it was made."""
    calls = []

    def count(place: str) -> dict:
        calls.append(place)
        if place == "meta":
            return {"flops_per_iteration": None,
                    "flops_error": "RuntimeError: Tensor.item() cannot be called on meta tensors"}
        return {"flops_per_iteration": 7}

    assert w.on_meta_or_fake(count)["flops_per_iteration"] == 7 and calls == ["meta", "fake"]


def test_the_count_is_cached_per_model_precision_and_batch_size(tmp_path):
    suite = get_suite("builtin")
    model = ModelConfig("builtin", "mlp")
    first = w.experiment_workload(suite, model, experiment("eval"), 16, folder=tmp_path)
    again = w.experiment_workload(suite, model, experiment("eval"), 16, folder=tmp_path)
    other = w.experiment_workload(suite, model, experiment("eval"), 8, folder=tmp_path)
    assert (first["cached"], again["cached"], other["cached"]) == (False, True, False)
    assert again["flops_per_iteration"] == first["flops_per_iteration"]
    assert other["flops_per_iteration"] * 2 == first["flops_per_iteration"]
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_outputs_name_each_field_and_what_it_holds():
    output = {"loss": torch.zeros(()), "logits": torch.zeros(2, 3, dtype=torch.bfloat16),
              "mems": (torch.zeros(1), torch.zeros(1)), "cache": object()}
    assert w.describe_outputs(output) == [
        "loss: tensor [] float32", "logits: tensor [2, 3] bfloat16", "mems: tuple of 2",
        "cache: object"]
    assert w.describe_outputs(torch.zeros(4)) == ["output: tensor [4] float32"]
    assert w.describe_outputs(None) is None


def test_eval_outputs_show_the_cache_the_t5_decoder_fills():
    """The harness leaves the T5 decoder's own config with use_cache on: its output holds a
    cache (work the FLOPs do not show). Training records no outputs."""
    suite = get_suite("huggingface")
    found = w.our_signature(suite, "T5Small", experiment("eval"), 1)
    assert any(field.endswith("EncoderDecoderCache") for field in found["outputs"])
    assert w.our_signature(get_suite("builtin"), "mlp", experiment("train"), 2)["outputs"] is None


def test_random_draws_are_counted_in_training_only():
    """Dropout costs time and no FLOPs: the signature counts the iteration's random draws."""
    class Dropping(torch.nn.Module):
        def __init__(self, p: float) -> None:
            super().__init__()
            self.linear, self.dropout = torch.nn.Linear(4, 4), torch.nn.Dropout(p)

        def forward(self, x):
            return torch.nn.functional.dropout(self.dropout(self.linear(x)), 0.5, self.training)

    def draws(p: float, mode: str) -> int:
        module = Dropping(p).train(mode == "train")
        x = torch.ones(2, 4)
        found = w.signature(module, ((x,), {}, None), w.IterationSpec(mode=mode),
                            lambda: module(x))
        return found["random_operators"]

    assert draws(0.1, "train") == 2 and draws(1e-30, "train") == 2
    assert draws(0.0, "train") == 1  # the module's dropout at 0 draws nothing
    assert draws(0.1, "eval") == 0


def test_the_draws_are_told_apart_by_the_probability_they_drop_with():
    """A dropout at 1e-30 draws as many masks as one at 0.1, but drops nothing (and fused
    attention runs a cheaper kernel): the signature says so."""
    def dropped(p: float, device: str) -> dict:
        module = torch.nn.Dropout(p).train(True)
        x = torch.ones(2, 4, device=device)
        return w.signature(module, ((x,), {}, None), w.IterationSpec(mode="train"),
                           lambda: module(x))["dropout_probabilities"]

    for device in ("cpu", "meta"):
        assert dropped(0.1, device) == {"0.1": 1}
        assert dropped(1e-30, device) != dropped(0.1, device)
    q = torch.ones(1, 1, 4, 8, device="meta")
    for p in (0.1, 1e-30):
        counter = w.RandomOperatorCounter()
        with counter:
            torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, None, False, p)
        assert counter.dropped == {f"{p:.3g}": 1}


def test_fused_attention_with_dropout_counts_as_a_draw():
    q = torch.ones(1, 1, 4, 8, device="meta")
    with_dropout = w.RandomOperatorCounter()
    with with_dropout:
        torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, None, False, 0.1)
    without = w.RandomOperatorCounter()
    with without:
        torch.ops.aten._scaled_dot_product_efficient_attention(q, q, q, None, False, 0.0)
    assert (with_dropout.count, without.count) == (1, 0)


def test_the_inductor_settings_the_model_compiles_with_and_none_without_inductor():
    suite = get_suite("timm")
    dinov2 = w.our_signature(suite, "vit_base_patch14_dinov2", experiment("eval"), 2)
    assert dinov2["inductor_settings"] == {"emulate_precision_casts": True}
    uncompiled = ExperimentConfig("cpu", None, None, None, "eval")
    assert w.our_signature(suite, "vit_base_patch14_dinov2", uncompiled, 2)["inductor_settings"] == {}
    assert w.our_signature(suite, "deit_tiny_patch16_224", experiment("eval"), 2)["inductor_settings"] == {}
    key = w.experiment_key(ModelConfig("timm", "vit_base_patch14_dinov2"), uncompiled, 2)
    assert key != w.experiment_key(ModelConfig("timm", "vit_base_patch14_dinov2"),
                                   experiment("eval"), 2)


# The workload cache's entries are untrusted (issue 54): an entry whose FLOP count would make
# TFLOP/s overflow, or whose inputs are not a list, does not fit its shape; it is set aside and
# the signature counted again, never copied into the line as cached.
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
