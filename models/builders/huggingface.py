"""Builds transformers models for the huggingface suite (imported in the child only)."""

from __future__ import annotations

from typing import Any

import torch

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, ModelInputs
from models.specs import huggingface as hs

# How PyTorch's harness feeds its models (huggingface.py: generate_inputs_for_model and
# _get_model_cls_and_config), as rules on the model's name and class, so they hold for every
# model of its list. Encoder-decoders of these families get their input ids as decoder ids too.
_DECODER_INPUT_PREFIXES = ("T5", "M2M100", "MT5")
_DECODER_INPUT_CLASSES = ("BlenderbotModel", "BlenderbotSmallModel",
                          "BlenderbotForConditionalGeneration", "PegasusModel", "MarianModel",
                          "MarianMTModel")
# Classes whose batches need a pad id (0, as the harness sets it).
_PAD_ZERO_CLASSES = ("GPT2ForSequenceClassification", "GPTNeoForSequenceClassification",
                     "GPTJForSequenceClassification")
_PAD_ZERO_PREFIXES = ("Roberta", "Marian")
# LayerDrop skips whole layers at random, so that a training step's work varies: off
# (benchmarks/fidelity/workload_differences.json, M2M100).
_LAYERDROP_MARKER = "layerdrop"

# Generic shrinking for reduced configs: applied to the keys a config has.
_REDUCED_SIZES = {
    "num_hidden_layers": 2, "num_layers": 2, "n_layer": 2,
    "encoder_layers": 2, "decoder_layers": 2, "num_decoder_layers": 2,
    "hidden_size": 64, "d_model": 64, "n_embd": 64, "word_embed_proj_dim": 64,
    "embedding_size": 32, "intra_bottleneck_size": 32, "pooler_hidden_size": 64,
    "num_attention_heads": 2, "n_head": 2, "num_heads": 2, "attention_heads": 2,
    "encoder_attention_heads": 2, "decoder_attention_heads": 2,
    "intermediate_size": 128, "d_ff": 128, "ffn_dim": 128, "d_inner": 128,
    "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
    "dim": 64, "hidden_dim": 128, "n_layers": 2, "n_heads": 2,
    "d_kv": 32, "vocab_size": 1024,
    "max_position_embeddings": 128, "n_positions": 128,
}

_TOKEN_ID_KEYS = (
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "forced_eos_token_id",
)


def config_settings(spec: hs.HFSpec, defaults: dict[str, Any], reduced: bool) -> dict[str, Any]:
    """The keyword arguments for the config class: spec settings and LayerDrop off; dropout
    keeps the config's defaults, as the harness builds them (models/dropout.py). Caches are
    not touched here (see `disable_cache`)."""
    base = {**defaults, **spec.config}
    settings: dict[str, Any] = dict(spec.config)
    if reduced:
        for key, value in _REDUCED_SIZES.items():
            current = base.get(key)
            if isinstance(current, int) and current > value:
                settings[key] = value
        settings.update(spec.reduced_config)
        vocab_size = settings.get("vocab_size", base.get("vocab_size"))
        for key in _TOKEN_ID_KEYS:
            token_id = base.get(key)
            if isinstance(token_id, int) and isinstance(vocab_size, int) and token_id >= vocab_size:
                settings[key] = vocab_size - 1
    for key in defaults:
        value = base[key]
        if _LAYERDROP_MARKER in key and (value is None or isinstance(value, float)):
            settings[key] = 0.0
    return settings


def build_config(spec: hs.HFSpec, model_class: type, reduced: bool):
    config_class = model_class.config_class
    defaults = config_class().to_dict()
    config = config_class(**config_settings(spec, defaults, reduced))
    if spec.model_class in _PAD_ZERO_CLASSES or spec.model_class.startswith(_PAD_ZERO_PREFIXES):
        # Batches above one need a pad id (to find each sequence's last token); the harness
        # sets 0.
        config.pad_token_id = 0
    return config


def disable_cache(module: torch.nn.Module) -> None:
    """`use_cache=False` on the built model's own config, as the harness sets it after
    construction. Submodules holding a copy of the config made at construction (the T5
    family's encoder and decoder) keep theirs: the decoder still fills a key/value cache on
    every call, as in the harness. XLNet's `use_mems_*` keep their defaults, as there."""
    config = getattr(module, "config", None)
    if config is not None and hasattr(config, "use_cache"):
        config.use_cache = False


def takes_decoder_inputs(name: str, spec: hs.HFSpec) -> bool:
    """Whether the harness passes the input ids as decoder input ids too."""
    return name.startswith(_DECODER_INPUT_PREFIXES) or spec.model_class in _DECODER_INPUT_CLASSES


def model_loss(output: Any, inputs: ModelInputs) -> torch.Tensor:
    """the model's own loss (its labels are among the forward's keyword arguments)"""
    return output.loss


def build(
    name: str, spec: hs.HFSpec, batch_size: int, sequence_length: int, reduced: bool = False,
    seed: int = DEFAULT_SEED,
) -> BenchmarkModel:
    """A transformers model with seeded random weights and a seeded input factory."""
    import transformers

    model_class = getattr(transformers, spec.model_class)
    config = build_config(spec, model_class, reduced)
    torch.manual_seed(seed)
    module = model_class(config)
    disable_cache(module)
    vocab_size = config.vocab_size
    shape = (batch_size, sequence_length)
    decoder_inputs = takes_decoder_inputs(name, spec)

    def make_inputs(seed: int) -> ModelInputs:
        """Token ids (all 0 for Roberta, whose pad id is 0; the end-of-sequence id last for
        Bart's family) and the labels of the model's head, as the harness draws them."""
        generator = torch.Generator().manual_seed(seed)

        def integers(high: int, size: tuple[int, ...]) -> torch.Tensor:
            return torch.randint(0, high, size, generator=generator, device="cpu")

        input_ids = integers(1 if spec.model_class.startswith("Roberta") else vocab_size, shape)
        if "Bart" in spec.model_class and isinstance(config.eos_token_id, int):
            input_ids[:, -1] = config.eos_token_id
        kwargs: dict[str, Any] = {"input_ids": input_ids}
        if decoder_inputs:
            kwargs["decoder_input_ids"] = input_ids
        if spec.head in (hs.CAUSAL_LM, hs.MASKED_LM):
            kwargs["labels"] = integers(vocab_size, shape)
        elif spec.head == hs.SEQ2SEQ:
            kwargs["labels"] = integers(vocab_size - 1, shape)
        elif spec.head == hs.SEQUENCE_CLASSIFICATION:
            kwargs["labels"] = integers(max(config.num_labels - 1, 1), (batch_size,))
        elif spec.head == hs.QUESTION_ANSWERING:
            for key in ("start_positions", "end_positions"):
                kwargs[key] = integers(sequence_length, (batch_size,))
        else:
            raise ValueError(f"model {name!r} has unknown head {spec.head!r}")
        return ModelInputs((), kwargs, None)

    return BenchmarkModel(name, module, make_inputs, model_loss, batch_size,
                          harness_optimizer=harness_optimizer(name))


def harness_optimizer(name: str) -> str:
    """What PyTorch's harness trains the model with on CUDA: sgd, none or adam."""
    if name in hs.HARNESS_SGD_MODELS:
        return "sgd"
    return "none" if name in hs.HARNESS_NO_OPTIMIZER_MODELS else "adam"
