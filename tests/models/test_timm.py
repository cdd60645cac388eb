"""The timm suite: listing without torch, reduced models that run, seeded inputs and weights."""

from __future__ import annotations

import pytest

from models import get_suite
from models.base import UnknownModelError
from models.suites.timm import TIMM_MODELS, TimmSuite
from tests.models.conftest import eval_forward, run_listing_without_torch, train_step

SMALL_MODEL = "deit_tiny_patch16_224"


@pytest.fixture(scope="module")
def reduced_suite() -> TimmSuite:
    return TimmSuite(reduced=True)


def test_lists_the_dashboard_models_with_their_batch_sizes():
    suite = TimmSuite(reduced=False)
    names = suite.model_names()
    assert len(names) == 18
    assert {"inception_v3", "beit_base_patch16_224", "mobilevit_s", "vit_base_patch16_siglip_256"} <= set(names)
    assert all("." not in name for name in names)  # pretrained tags are not part of names
    assert suite.default_batch_size("ghostnet_100") == 512
    assert suite.default_batch_size("mobilenetv3_large_100") == 512
    assert suite.default_batch_size("repvgg_a2") == 128


def test_unknown_model_is_named_in_the_error():
    with pytest.raises(UnknownModelError, match="resnet9000"):
        TimmSuite(reduced=False).default_batch_size("resnet9000")


@pytest.mark.e2e
def test_listing_does_not_import_torch_or_timm():
    listed = run_listing_without_torch("timm")
    assert listed["heavy"] == []
    assert listed["names"] == list(TIMM_MODELS)
    assert listed["sizes"]["ghostnet_100"] == 512


def test_every_architecture_exists_in_timm():
    import timm

    missing = [spec.architecture for spec in TIMM_MODELS.values() if not timm.is_model(spec.architecture)]
    assert missing == []


def test_reduced_model_eval_forward_gives_class_logits(reduced_suite):
    bench = reduced_suite.load(SMALL_MODEL, "eval", 2)
    assert bench.batch_size == 2
    output = eval_forward(bench)
    assert tuple(output.shape) == (2, 1000)


def test_reduced_model_train_step_gives_gradients(reduced_suite):
    import torch

    bench = reduced_suite.load(SMALL_MODEL, "train", 2)
    loss, grads = train_step(bench)
    assert loss.ndim == 0 and torch.isfinite(loss)
    assert grads and all(g is not None for g in grads.values())
    assert any(float(g.abs().sum()) > 0 for g in grads.values())


def test_inputs_are_deterministic_from_the_seed(reduced_suite):
    import torch

    bench = reduced_suite.load(SMALL_MODEL, "eval", 3)
    first, again, other = bench.make_inputs(7), bench.make_inputs(7), bench.make_inputs(8)
    assert torch.equal(first.args[0], again.args[0])
    assert not torch.equal(first.args[0], other.args[0])
    # No labels: PyTorch's harness trains timm models on the mean of the output.
    assert first.targets is None


def test_weights_are_seeded(reduced_suite):
    import torch

    one = reduced_suite.load(SMALL_MODEL, "eval", 1).module.state_dict()
    two = reduced_suite.load(SMALL_MODEL, "eval", 1).module.state_dict()
    assert one.keys() == two.keys()
    assert all(torch.equal(one[k], two[k]) for k in one)


def test_train_mode_is_deterministic_with_stochastic_depth_kept(reduced_suite):
    """Swin has stochastic depth by default, which PyTorch's harness trains with: the timed
    model keeps its probabilities; the verifier's (keep_dropout_kernels) keeps the draws at
    KEPT_DROPOUT, and nothing is dropped, so a step stays deterministic."""
    import torch

    from models.dropout import KEPT_DROPOUT, keep_dropout_kernels

    timed = reduced_suite.load("swin_base_patch4_window7_224", "train", 2)
    probabilities = [m.drop_prob for m in timed.module.modules() if hasattr(m, "drop_prob")]
    assert probabilities and max(probabilities) > 0.01
    bench = reduced_suite.load("swin_base_patch4_window7_224", "train", 2)
    keep_dropout_kernels(bench.module)
    probabilities = [m.drop_prob for m in bench.module.modules() if hasattr(m, "drop_prob")]
    assert probabilities and set(probabilities) == {KEPT_DROPOUT}
    inputs = bench.make_inputs(0)
    bench.module.train(True)
    with torch.random.fork_rng():
        draws_before = torch.random.get_rng_state()
        first = bench.module(*inputs.args)
        assert not torch.equal(torch.random.get_rng_state(), draws_before)  # drew masks
    second = bench.module(*inputs.args)
    assert torch.equal(first, second)


def test_full_size_model_uses_its_timm_input_size():
    bench = TimmSuite(reduced=False).load("inception_v3", "eval", 1)
    assert tuple(bench.make_inputs(0).args[0].shape) == (1, 3, 299, 299)


def test_inference_uses_the_test_input_size_as_pytorchs_harness_does():
    # convnextv2_nano.fcmae_ft_in22k_in1k trains at 224 and is tested at 288; the harness
    # (timm's resolve_data_config with use_test_size) feeds 288 for inference.
    suite = TimmSuite(reduced=False)
    assert tuple(suite.load("convnextv2_nano", "eval", 1).make_inputs(0).args[0].shape) == (1, 3, 288, 288)
    assert tuple(suite.load("convnextv2_nano", "train", 1).make_inputs(0).args[0].shape) == (1, 3, 224, 224)


def test_reduced_default_batch_sizes_are_small():
    assert TimmSuite(reduced=True).default_batch_size("ghostnet_100") == 4


def test_registered_under_its_name():
    assert get_suite("timm").name == "timm"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TIMM_MODELS))
def test_every_reduced_model_trains(reduced_suite, name):
    import torch

    loss, grads = train_step(reduced_suite.load(name, "train", 2))
    assert torch.isfinite(loss) and any(g is not None for g in grads.values())


def test_builds_on_the_default_device_and_makes_inputs_on_the_cpu(reduced_suite):
    """A CUDA child builds under torch.device("cuda") (child/worker.py: build_device):
    the weights follow the default device (meta here), the inputs stay on the CPU."""
    import torch

    name = reduced_suite.model_names()[0]
    with torch.device("meta"):
        bench = reduced_suite.load(name, "eval", 2)
        inputs = bench.make_inputs(0)
    assert {p.device.type for p in bench.module.parameters()} == {"meta"}
    assert {t.device.type for t in inputs.args} == {"cpu"}


@pytest.mark.e2e
def test_compiled_training_leaves_the_loss_out_of_the_graph_as_the_harness_does():
    # The harness's reduce_to_scalar_loss lives in a module dynamo skips: its graph returns
    # the model's output, and the loss runs eagerly after a break. Ours' output_mean_loss is
    # kept out the same way (benchmarks/fidelity/graph_parity.py: the same graphs in both).
    from tests.fixtures.compiled_graphs import compiled_training_graphs, model_graph, output_shapes

    graphs = compiled_training_graphs("timm", SMALL_MODEL, "amp")
    shapes = output_shapes(model_graph(graphs))
    assert len(shapes) == 1 and len(shapes[0]) == 2 and shapes[0][0] == 2, shapes
    assert all(output_shapes(graph) != [()] for graph in graphs)
