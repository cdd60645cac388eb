"""The huggingface suite: transformers models built from their config classes.

Each model is a transformers class built from a default config (plus the few settings its
short name stands for) with random weights: no hub, no tokenizer. Inputs are seeded token
ids with labels that fit the model's head, so `outputs.loss` exists and is the training
loss. Dropout is off and caches are off. transformers is imported only in `load`.
"""

from __future__ import annotations

from typing import Optional

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel
from models.reduced import ReducibleSuite
from models.specs.huggingface import (
    CAUSAL_LM, FP32_ONLY_MODELS, HALF_PRECISIONS, MASKED_LM, QUESTION_ANSWERING, SEQ2SEQ,
    SEQUENCE_CLASSIFICATION, HFSpec,
)

REDUCED_SEQUENCE_LENGTH = 32

# t5-small's setting; T5Config's defaults leave it out and shifting labels needs it.
_T5_DECODER_START = {"decoder_start_token_id": 0}

HF_MODELS: dict[str, HFSpec] = {
    "AlbertForMaskedLM": HFSpec("AlbertForMaskedLM", MASKED_LM, 8, 512),
    "AllenaiLongformerBase": HFSpec(
        "LongformerForMaskedLM", MASKED_LM, 8, 1024,
        config={"max_position_embeddings": 4098, "vocab_size": 50265, "attention_window": 512},
        reduced_config={"attention_window": 16},
    ),
    "BartForCausalLM": HFSpec("BartForCausalLM", CAUSAL_LM, 8, 1024),
    "BertForMaskedLM": HFSpec("BertForMaskedLM", MASKED_LM, 32, 512),
    "BlenderbotForCausalLM": HFSpec("BlenderbotForCausalLM", CAUSAL_LM, 32, 128),
    "BlenderbotForConditionalGeneration": HFSpec(
        "BlenderbotForConditionalGeneration", SEQ2SEQ, 16, 128
    ),
    "DebertaV2ForMaskedLM": HFSpec("DebertaV2ForMaskedLM", MASKED_LM, 8, 512),
    "DistilBertForMaskedLM": HFSpec("DistilBertForMaskedLM", MASKED_LM, 256, 128),
    "DistillGPT2": HFSpec("GPT2LMHeadModel", CAUSAL_LM, 32, 512, config={"n_layer": 6}),
    "ElectraForCausalLM": HFSpec("ElectraForCausalLM", CAUSAL_LM, 64, 512),
    "GPT2ForSequenceClassification": HFSpec(
        "GPT2ForSequenceClassification", SEQUENCE_CLASSIFICATION, 8, 1024
    ),
    "GPTJForCausalLM": HFSpec(
        "GPTJForCausalLM", CAUSAL_LM, 1, 128, reduced_config={"rotary_dim": 16}
    ),
    "GPTJForQuestionAnswering": HFSpec(
        "GPTJForQuestionAnswering", QUESTION_ANSWERING, 1, 128, reduced_config={"rotary_dim": 16}
    ),
    "GPTNeoForCausalLM": HFSpec(
        "GPTNeoForCausalLM", CAUSAL_LM, 32, 128,
        reduced_config={"attention_types": [[["global", "local"], 1]]},
    ),
    "GPTNeoForSequenceClassification": HFSpec(
        "GPTNeoForSequenceClassification", SEQUENCE_CLASSIFICATION, 32, 128,
        reduced_config={"attention_types": [[["global", "local"], 1]]},
    ),
    "GoogleFnet": HFSpec("FNetForMaskedLM", MASKED_LM, 32, 512),
    "LayoutLMForMaskedLM": HFSpec("LayoutLMForMaskedLM", MASKED_LM, 32, 512),
    "M2M100ForConditionalGeneration": HFSpec("M2M100ForConditionalGeneration", SEQ2SEQ, 64, 128),
    "MBartForCausalLM": HFSpec("MBartForCausalLM", CAUSAL_LM, 8, 1024),
    "MT5ForConditionalGeneration": HFSpec("MT5ForConditionalGeneration", SEQ2SEQ, 32, 128),
    "MegatronBertForCausalLM": HFSpec(
        "MegatronBertForCausalLM", CAUSAL_LM, 16, 512
    ),
    "MobileBertForMaskedLM": HFSpec(
        "MobileBertForMaskedLM", MASKED_LM, 256, 128,
        reduced_config={"num_feedforward_networks": 1},
    ),
    "OPTForCausalLM": HFSpec("OPTForCausalLM", CAUSAL_LM, 4, 2048),
    "PLBartForCausalLM": HFSpec("PLBartForCausalLM", CAUSAL_LM, 16, 1024),
    "PegasusForCausalLM": HFSpec("PegasusForCausalLM", CAUSAL_LM, 128, 128),
    "RobertaForCausalLM": HFSpec("RobertaForCausalLM", CAUSAL_LM, 32, 512),
    "T5ForConditionalGeneration": HFSpec(
        "T5ForConditionalGeneration", SEQ2SEQ, 8, 1024, config=_T5_DECODER_START
    ),
    # T5Config's defaults are t5-small's sizes, so T5Small is T5ForConditionalGeneration's
    # network; the dashboard tracks both names.
    "T5Small": HFSpec("T5ForConditionalGeneration", SEQ2SEQ, 8, 1024, config=_T5_DECODER_START),
    "TrOCRForCausalLM": HFSpec("TrOCRForCausalLM", CAUSAL_LM, 64, 256),
    "XGLMForCausalLM": HFSpec("XGLMForCausalLM", CAUSAL_LM, 32, 128),
    "XLNetLMHeadModel": HFSpec("XLNetLMHeadModel", MASKED_LM, 16, 512),
    "YituTechConvBert": HFSpec("ConvBertForMaskedLM", MASKED_LM, 32, 512),
    # Encoder-decoder forms of families the dashboard tracks only as decoders.
    "BartForConditionalGeneration": HFSpec(
        "BartForConditionalGeneration", SEQ2SEQ, 8, 1024, extra=True
    ),
    "MBartForConditionalGeneration": HFSpec(
        "MBartForConditionalGeneration", SEQ2SEQ, 8, 1024, extra=True
    ),
    "PegasusForConditionalGeneration": HFSpec(
        "PegasusForConditionalGeneration", SEQ2SEQ, 32, 128, extra=True
    ),
}


class HuggingFaceSuite(ReducibleSuite):
    """transformers models from configs; `reduced=True` builds small versions."""

    name = "huggingface"
    order = 40
    # transformers' model machinery: about 3 CPU-s of imports a child need not repeat.
    preload = ("transformers.modeling_utils",)

    specs = HF_MODELS

    def sequence_length(self, model_name: str) -> int:
        """Tokens per sequence (encoder and decoder alike)."""
        self.check_model(model_name)
        if self.reduced:
            return REDUCED_SEQUENCE_LENGTH
        return HF_MODELS[model_name].sequence_length

    def skip_reason(self, model_name: str, test: str,
                    precision: Optional[str] = None) -> Optional[str]:
        """A model that runs in fp32 only, asked for bf16 or fp16 (PyTorch's harness runs
        it in fp32 instead; a line says what it measured, so ours skips it)."""
        self.check_model(model_name)
        if model_name in FP32_ONLY_MODELS and precision in HALF_PRECISIONS:
            return (f"{model_name} runs in fp32 only: its FFT has no {precision} kernel "
                    "(PyTorch's harness lists it as only_fp32 and runs it in fp32); "
                    "use --precision=fp32 or amp")
        return None

    def load(self, model_name: str, test: str, batch_size: Optional[int],
             seed: int = DEFAULT_SEED) -> BenchmarkModel:
        self.check_model(model_name)
        from models.builders import huggingface as builder

        return builder.build(
            model_name,
            HF_MODELS[model_name],
            batch_size or self.default_batch_size(model_name),
            self.sequence_length(model_name),
            reduced=self.reduced,
            seed=seed,
        )


SUITE = HuggingFaceSuite
