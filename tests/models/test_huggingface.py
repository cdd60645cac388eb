"""The huggingface suite: every model builds from its config, reduced models run and train."""

from __future__ import annotations

import pytest

from models import get_suite
from models.base import UnknownModelError
from models.specs.huggingface import (
    CAUSAL_LM, HEADS, QUESTION_ANSWERING, SEQ2SEQ, SEQUENCE_CLASSIFICATION,
)
from models.suites.huggingface import HF_MODELS, REDUCED_SEQUENCE_LENGTH, HuggingFaceSuite
from tests.models.conftest import eval_forward, run_listing_without_torch, train_step

ENCODER, DECODER, ENCODER_DECODER = "BertForMaskedLM", "DistillGPT2", "T5Small"


@pytest.fixture(scope="module")
def reduced_suite() -> HuggingFaceSuite:
    return HuggingFaceSuite(reduced=True)


def test_lists_thirty_or_more_models_across_families():
    names = HuggingFaceSuite(reduced=False).model_names()
    assert len(names) >= 30
    assert all("/" not in name for name in names)  # hub checkpoints do not apply
    for family in ("Bert", "Albert", "DistilBert", "Roberta", "Electra", "GPT2", "OPT", "T5",
                   "Bart", "MBart", "Pegasus", "XLNet"):
        assert any(name.startswith(family) for name in names), family
    for short_name in ("T5Small", "DistillGPT2", "GoogleFnet", "YituTechConvBert", "AllenaiLongformerBase"):
        assert short_name in names
    assert {spec.head for spec in HF_MODELS.values()} == set(HEADS)


def test_batch_sizes_and_sequence_lengths():
    suite = HuggingFaceSuite(reduced=False)
    assert suite.default_batch_size("DistilBertForMaskedLM") == 256
    assert suite.default_batch_size("GPTJForCausalLM") == 1
    assert suite.sequence_length("OPTForCausalLM") == 2048
    reduced = HuggingFaceSuite(reduced=True)
    assert reduced.default_batch_size("DistilBertForMaskedLM") == 4
    assert reduced.sequence_length("OPTForCausalLM") == REDUCED_SEQUENCE_LENGTH


def test_unknown_model_is_named_in_the_error():
    with pytest.raises(UnknownModelError, match="NoSuchModel"):
        HuggingFaceSuite(reduced=True).load("NoSuchModel", "eval", 1)


@pytest.mark.e2e
def test_listing_does_not_import_torch_or_transformers():
    listed = run_listing_without_torch("huggingface")
    assert listed["heavy"] == []
    assert listed["names"] == list(HF_MODELS)


@pytest.mark.parametrize("name", list(HF_MODELS))
def test_every_model_builds_reduced_and_computes_its_loss(reduced_suite, name):
    import torch

    bench = reduced_suite.load(name, "eval", 2)
    assert bench.batch_size == 2
    config = bench.module.config
    assert config.hidden_size <= 64 and config.vocab_size <= 1024
    output = eval_forward(bench)
    loss = bench.loss_fn(output, bench.make_inputs(0))
    assert loss.ndim == 0 and torch.isfinite(loss)


@pytest.mark.parametrize("name", [ENCODER, DECODER, ENCODER_DECODER])
def test_eval_forward_gives_token_logits(reduced_suite, name):
    bench = reduced_suite.load(name, "eval", 2)
    output = eval_forward(bench)
    vocab = bench.module.config.vocab_size
    assert tuple(output.logits.shape) == (2, REDUCED_SEQUENCE_LENGTH, vocab)
    assert output.loss is not None


@pytest.mark.parametrize("name", [ENCODER, DECODER, ENCODER_DECODER])
def test_train_step_gives_gradients(reduced_suite, name):
    import torch

    bench = reduced_suite.load(name, "train", 2)
    loss, grads = train_step(bench)
    assert torch.isfinite(loss)
    with_grad = [n for n, g in grads.items() if g is not None and float(g.abs().sum()) > 0]
    assert len(with_grad) >= 0.9 * len(grads)


def test_train_mode_keeps_the_dropout_kernels_and_stays_deterministic(reduced_suite):
    """For the verifier (keep_dropout_kernels): the harness's dropout masks drawn at
    KEPT_DROPOUT, so that nothing is dropped and a step stays deterministic."""
    import torch

    from models.dropout import KEPT_DROPOUT, keep_dropout_kernels

    bench = reduced_suite.load(ENCODER_DECODER, "train", 2)
    keep_dropout_kernels(bench.module)
    inputs = bench.make_inputs(0)
    bench.module.train(True)
    with torch.random.fork_rng():
        draws_before = torch.random.get_rng_state()
        first = bench.module(**inputs.kwargs).logits
        assert not torch.equal(torch.random.get_rng_state(), draws_before)  # drew masks
    second = bench.module(**inputs.kwargs).logits
    assert torch.equal(first, second)
    config = bench.module.config.to_dict()
    dropouts = {k: v for k, v in config.items() if "dropout" in k and isinstance(v, float)}
    assert KEPT_DROPOUT in dropouts.values()
    assert set(dropouts.values()) <= {0.0, KEPT_DROPOUT}
    modules = [m.p for m in bench.module.modules() if isinstance(m, torch.nn.Dropout)]
    assert modules and set(modules) == {KEPT_DROPOUT}
    assert config["use_cache"] is False


def test_timed_models_drop_as_the_harness_does(reduced_suite, monkeypatch):
    """By default (the timed model) every dropout keeps the config's default, as in the
    harness's model: fused attention gets the same dropout_p (a p of 1e-30 runs a cheaper
    kernel on CUDA) and a training step drops, so two steps differ."""
    import torch
    import torch.nn.functional as F

    bench = reduced_suite.load("PLBartForCausalLM", "train", 2)
    defaults = type(bench.module.config)().to_dict()
    config = bench.module.config.to_dict()
    for key, value in defaults.items():
        if "dropout" in key and isinstance(value, float):
            assert config[key] == value, key
    assert defaults["attention_dropout"] > 0.01
    seen = []
    original = F.scaled_dot_product_attention

    def probe(*args, **kwargs):
        seen.append(kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0))
        return original(*args, **kwargs)

    inputs = bench.make_inputs(0)
    bench.module.train(True)
    with monkeypatch.context() as patched:
        patched.setattr(F, "scaled_dot_product_attention", probe)
        first = bench.module(**inputs.kwargs).logits
    second = bench.module(**inputs.kwargs).logits
    assert not torch.equal(first, second)
    assert seen and set(seen) == {defaults["attention_dropout"]}


def test_inputs_are_deterministic_from_the_seed(reduced_suite):
    import torch

    bench = reduced_suite.load(ENCODER, "eval", 2)
    first, again, other = bench.make_inputs(3), bench.make_inputs(3), bench.make_inputs(4)
    for key in ("input_ids", "labels"):
        assert torch.equal(first.kwargs[key], again.kwargs[key])
    assert not torch.equal(first.kwargs["input_ids"], other.kwargs["input_ids"])


def test_weights_are_seeded(reduced_suite):
    import torch

    one = reduced_suite.load(DECODER, "eval", 1).module.state_dict()
    two = reduced_suite.load(DECODER, "eval", 1).module.state_dict()
    assert all(torch.equal(one[k], two[k]) for k in one)


def test_labels_fit_each_head(reduced_suite):
    for name, spec in HF_MODELS.items():
        if spec.head not in (SEQUENCE_CLASSIFICATION, QUESTION_ANSWERING, SEQ2SEQ):
            continue
        bench = reduced_suite.load(name, "eval", 3)
        kwargs = bench.make_inputs(0).kwargs
        if spec.head == SEQUENCE_CLASSIFICATION:
            assert kwargs["labels"].shape == (3,)
            assert int(kwargs["labels"].max()) < bench.module.config.num_labels
            assert bench.module.config.pad_token_id not in kwargs["input_ids"]
        elif spec.head == QUESTION_ANSWERING:
            for key in ("start_positions", "end_positions"):
                assert int(kwargs[key].max()) < REDUCED_SEQUENCE_LENGTH
        else:
            assert kwargs["labels"].shape == (3, REDUCED_SEQUENCE_LENGTH)


def test_full_size_configs_keep_the_family_defaults():
    from models.builders.huggingface import build_config

    import transformers

    spec = HF_MODELS["DistillGPT2"]
    config = build_config(spec, transformers.GPT2LMHeadModel, reduced=False)
    assert (config.n_layer, config.n_embd, config.vocab_size) == (6, 768, 50257)
    # GPT2's default dropout (0.1) as the harness builds it; for the verifier, a draw that
    # drops nothing (models/dropout.py), in the config the model reads too.
    import torch

    from models.dropout import KEPT_DROPOUT, keep_dropout_kernels

    assert config.resid_pdrop == 0.1
    verified = torch.nn.Module()
    verified.config = build_config(spec, transformers.GPT2LMHeadModel, reduced=False)
    keep_dropout_kernels(verified)
    assert verified.config.resid_pdrop == KEPT_DROPOUT
    # The cache is turned off on the built model (as the harness does), not in this config.
    assert config.use_cache is True


def test_every_model_constructs_at_full_size_on_the_meta_device():
    """Full default configs, GPT-J's six billion parameters included, without memory."""
    import torch
    import transformers

    from models.builders.huggingface import build_config

    for name, spec in HF_MODELS.items():
        model_class = getattr(transformers, spec.model_class)
        config = build_config(spec, model_class, reduced=False)
        with torch.device("meta"):
            model = model_class(config)
        assert sum(p.numel() for p in model.parameters()) > 10_000_000, name
        positions = getattr(config, "max_position_embeddings", None)
        if not isinstance(positions, int) or positions <= 0:  # XLNet: relative, -1
            continue
        if spec.model_class.startswith("Roberta"):
            # As in PyTorch's harness, every input id is the pad id (0): every position id
            # is the pad index, whatever the length.
            assert config.pad_token_id == 0, name
            continue
        if spec.model_class.startswith("Longformer"):
            positions -= config.pad_token_id + 1  # positions start after the pad id
        assert spec.sequence_length <= positions, name


def test_roberta_inputs_are_its_pad_id_as_in_pytorchs_harness(reduced_suite):
    bench = reduced_suite.load("RobertaForCausalLM", "eval", 2)
    input_ids = bench.make_inputs(0).kwargs["input_ids"]
    assert bench.module.config.pad_token_id == 0
    assert int(input_ids.abs().max()) == 0


def test_registered_under_its_name():
    assert get_suite("huggingface").name == "huggingface"


def test_causal_lm_losses_score_the_labels_they_are_given(reduced_suite):
    """As in PyTorch's harness, labels are random tokens of the vocabulary, apart from the
    input ids; the model's loss scores them (shifted by the model, or as they are by the
    decoder classes of encoder-decoder families)."""
    import torch
    from torch.nn import functional as F

    for name, spec in HF_MODELS.items():
        if spec.head != CAUSAL_LM:
            continue
        bench = reduced_suite.load(name, "eval", 2)
        inputs = bench.make_inputs(0)
        output = eval_forward(bench)
        labels = inputs.kwargs["labels"]
        assert not torch.equal(labels, inputs.kwargs["input_ids"]), name
        assert int(labels.min()) >= 0 and int(labels.max()) < bench.module.config.vocab_size
        logits = output.logits.float()
        shifted = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())
        unshifted = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
        assert (torch.allclose(output.loss, shifted, atol=1e-4)
                or torch.allclose(output.loss, unshifted, atol=1e-4)), name


@pytest.mark.parametrize("name", [ENCODER, DECODER, ENCODER_DECODER])
def test_builds_on_the_default_device_and_makes_inputs_on_the_cpu(reduced_suite, name):
    """A CUDA child builds under torch.device("cuda") (child/worker.py: build_device):
    the weights follow the default device (meta here), the inputs stay on the CPU."""
    import torch

    with torch.device("meta"):
        bench = reduced_suite.load(name, "eval", 2)
    assert {p.device.type for p in bench.module.parameters()} == {"meta"}
    with torch.device("meta"):
        inputs = bench.make_inputs(0)
    assert {t.device.type for t in inputs.kwargs.values()} == {"cpu"}


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_an_fp32_only_model_is_skipped_at_half_precision_with_the_reason(precision):
    reason = HuggingFaceSuite(reduced=False).skip_reason("GoogleFnet", "eval", precision=precision)
    assert reason and "fp32 only" in reason and precision in reason and "only_fp32" in reason


@pytest.mark.parametrize("model, precision", [
    ("GoogleFnet", "fp32"), ("GoogleFnet", "amp"), ("GoogleFnet", None), ("BertForMaskedLM", "bf16"),
])
def test_other_precisions_and_models_run(model, precision):
    assert HuggingFaceSuite(reduced=False).skip_reason(model, "train", precision=precision) is None


def test_the_fp32_only_list_is_the_harnesses():
    """The models PyTorch's harness runs in fp32 only are ours (its huggingface.yaml, beside
    the clone as CI has it)."""
    import yaml

    from benchmarks.fidelity.fidelity_cases import DEFAULT_REFERENCE
    from models.specs.huggingface import FP32_ONLY_MODELS

    path = DEFAULT_REFERENCE / "huggingface.yaml"
    if not path.exists():
        pytest.skip(f"the harness is not beside the clone ({path})")
    config = yaml.safe_load(path.read_text())
    assert set(config["only_fp32"]) == FP32_ONLY_MODELS


@pytest.mark.parametrize("name", ["MT5ForConditionalGeneration", ENCODER_DECODER])
def test_decoder_keeps_its_cache_as_the_harness_leaves_it(reduced_suite, name):
    """The harness turns `use_cache` off on the built model's config only: the T5 family's
    decoder holds a copy of the config made at construction, keeps `use_cache=True`, and so
    fills a key/value cache on every eval call (its dynamo graph breaks on that cache)."""
    bench = reduced_suite.load(name, "eval", 2)
    assert bench.module.config.use_cache is False
    assert bench.module.decoder.config.use_cache is True
    assert eval_forward(bench).past_key_values is not None


def test_gpt2_shares_its_config_so_no_cache_is_filled(reduced_suite):
    bench = reduced_suite.load("GPT2ForSequenceClassification", "eval", 2)
    assert bench.module.transformer.config is bench.module.config
    assert eval_forward(bench).past_key_values is None


def test_xlnet_keeps_its_eval_memories_as_the_harness_does(reduced_suite):
    """The harness leaves XLNet's `use_mems_eval` at its default (on): eval returns the mems."""
    bench = reduced_suite.load("XLNetLMHeadModel", "eval", 2)
    assert bench.module.config.use_mems_eval is True
    assert eval_forward(bench).mems is not None
