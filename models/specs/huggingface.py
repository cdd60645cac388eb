"""The huggingface suite's heads and spec dataclass, shared by models.suites.huggingface
and models.builders.huggingface."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MASKED_LM = "masked_lm"  # labels: a token per position
CAUSAL_LM = "causal_lm"  # labels: a token per position (the model shifts them)
SEQ2SEQ = "seq2seq"  # encoder input ids; labels: decoder tokens (decoder inputs derive from them)
SEQUENCE_CLASSIFICATION = "sequence_classification"  # labels: a class per sequence
QUESTION_ANSWERING = "question_answering"  # start and end positions per sequence
HEADS = (MASKED_LM, CAUSAL_LM, SEQ2SEQ, SEQUENCE_CLASSIFICATION, QUESTION_ANSWERING)


@dataclass(frozen=True)
class HFSpec:
    """One model: transformers class, its head, dashboard batch size, sequence length."""

    model_class: str
    head: str
    batch_size: int
    sequence_length: int
    # Settings on top of the config class's defaults (what a short name stands for).
    config: dict[str, Any] = field(default_factory=dict)
    # Settings on top of the generic shrinking, for the reduced form.
    reduced_config: dict[str, Any] = field(default_factory=dict)
    extra: bool = False  # not on the dashboard's list


#: The models that run in fp32 only (PyTorch's harness: huggingface.yaml's only_fp32):
#: GoogleFnet's FFT has no bf16 or fp16 kernel, on the CPU or CUDA.
FP32_ONLY_MODELS = frozenset({"GoogleFnet"})
#: Precisions that cast the model's weights to a 16-bit type (amp keeps them in fp32).
HALF_PRECISIONS = frozenset({"bf16", "fp16"})

#: The models PyTorch's harness trains with SGD rather than Adam (BENCHMARK_USE_SGD).
HARNESS_SGD_MODELS = frozenset({
    "AlbertForMaskedLM", "BartForCausalLM", "ElectraForCausalLM",
    "M2M100ForConditionalGeneration", "MBartForCausalLM", "OPTForCausalLM", "PLBartForCausalLM",
    "PegasusForCausalLM", "TrOCRForCausalLM", "XGLMForCausalLM",
})

#: The models PyTorch's harness trains without an optimizer step (CI_SKIP_OPTIMIZER).
HARNESS_NO_OPTIMIZER_MODELS = frozenset({"MobileBertForMaskedLM"})
