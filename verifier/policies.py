"""The verifier's tolerance tables per suite, as data (the harness's values).

PyTorch's dynamo benchmark harness picks one `tol` per experiment from the suite, the
test, the precision, the device and the model (its `get_tolerance_and_cosine_flag` and
the suites' YAML lists), and lists the models whose small tensors get a larger error
multiplier and whose boolean masks are judged by IoU. The same choices are written here
as tables: a suite's rules are tried in order and the first that matches gives `tol`.

Suites the harness does not have (builtin, dummy, faults, bound) use the general rules:
the harness's torchbench rules without its per-model lists, whose fp32 `tol` is 1e-4,
`same()`'s own default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Optional

ANY: frozenset[str] = frozenset()

FP16_OR_AMP = frozenset({"fp16", "amp"})
BF16 = frozenset({"bf16"})
GPUS = frozenset({"cuda", "xpu"})


@dataclass(frozen=True)
class Rule:
    """One line of a suite's table: where it applies (an empty set: anywhere), and its tol.

    `cosine`: judge every leaf by cosine similarity (the harness's per-model `cosine` list).
    """

    tol: float
    test: Optional[str] = None
    precisions: frozenset[str] = ANY
    devices: frozenset[str] = ANY
    models: frozenset[str] = ANY
    cosine: bool = False

    def matches(self, test: str, precision: str, device: str, model: Optional[str]) -> bool:
        return ((self.test is None or self.test == test)
                and (not self.precisions or precision in self.precisions)
                and (not self.devices or device in self.devices)
                and (not self.models or model in self.models))


@dataclass(frozen=True)
class SuitePolicy:
    """A suite's tolerance rules (first match wins) and its per-model exceptions.

    larger_multiplier_models: models whose tensors of at most 10 (500) elements may be 10
    (8) times as wrong as eager against fp64 (`use_larger_multiplier_for_smaller_tensor`).
    iou_thresholds: models whose boolean outputs pass on an IoU at least this high.
    """

    rules: tuple[Rule, ...]
    larger_multiplier_models: frozenset[str] = ANY
    iou_thresholds: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def rule_for(self, test: str, precision: str, device: str, model: Optional[str]) -> Rule:
        for rule in self.rules:
            if rule.matches(test, precision, device, model):
                return rule
        raise LookupError("a suite's rules must end with one that matches everything")


# The harness's torchbench rules, less its per-model lists (torchbench.py).
GENERAL_RULES = (
    Rule(1e-3, precisions=FP16_OR_AMP),
    Rule(1e-3, test="train", devices=GPUS),
    Rule(1e-4),
)

TORCHBENCH = SuitePolicy(
    rules=(
        Rule(1e-2, precisions=FP16_OR_AMP,
             models=frozenset({"doctr_reco_predictor", "drq", "phlippe_resnet"})),
        Rule(8e-2, precisions=FP16_OR_AMP,
             models=frozenset({"soft_actor_critic", "tacotron2", "yolov3", "squeezenet1_1",
                               "shufflenet_v2_x1_0"})),
        Rule(1e-3, precisions=FP16_OR_AMP),
        Rule(1e-2, precisions=BF16, models=frozenset({"doctr_reco_predictor", "drq"})),
        Rule(8e-2, precisions=BF16, devices=frozenset({"xpu"}),
             models=frozenset({"squeezenet1_1", "phlippe_resnet"})),
        Rule(8e-2, test="train", devices=GPUS,
             models=frozenset({"soft_actor_critic", "tacotron2", "yolov3", "squeezenet1_1",
                               "shufflenet_v2_x1_0"})),
        Rule(1e-3, test="train", devices=GPUS),
        Rule(1e-4),
    ),
    larger_multiplier_models=frozenset({"yolov3"}),
    iou_thresholds=MappingProxyType({
        "detectron2_maskrcnn_r_101_fpn": 0.99, "detectron2_maskrcnn_r_50_c4": 0.99,
        "sam": 0.95, "sam_fast": 0.95, "vision_maskrcnn": 0.99}),
)

TIMM = SuitePolicy(
    rules=(
        Rule(16e-2, test="train", models=frozenset({"beit_base_patch16_224"})),
        Rule(8e-2, test="train", models=frozenset({"deit_base_distilled_patch16_224",
                                                   "vit_base_patch16_siglip_256"})),
        Rule(4e-2, test="train", models=frozenset({"inception_v3", "mobilenetv3_large_100"})),
        Rule(4e-2, test="train", precisions=frozenset({"fp16"}), devices=frozenset({"xpu"}),
             models=frozenset({"botnet26t_256"})),
        Rule(1e-2, test="train"),
        Rule(1e-3),
    ),
    larger_multiplier_models=frozenset({"inception_v3", "mobilenetv3_large_100",
                                        "vit_base_patch14_dinov2.lvd142m"}),
)

HUGGINGFACE = SuitePolicy(
    rules=(
        Rule(2e-2, test="train", models=frozenset({"MT5ForConditionalGeneration"})),
        Rule(1e-2, test="train"),
        Rule(5e-3, test="eval", devices=frozenset({"cpu"}),
             models=frozenset({"GPT2ForSequenceClassification"})),
        Rule(4e-3, test="eval", models=frozenset({"GPT2ForSequenceClassification"})),
        Rule(1e-3),
    ),
    larger_multiplier_models=frozenset({"GPT2ForSequenceClassification", "BertForMaskedLM"}),
)

GENERAL = SuitePolicy(rules=GENERAL_RULES)

SUITES: Mapping[str, SuitePolicy] = MappingProxyType({
    "torchbench": TORCHBENCH, "timm": TIMM, "huggingface": HUGGINGFACE})


def suite_policy(suite: Optional[str]) -> SuitePolicy:
    """The policy of `suite`: its own where the harness has the suite, else the general one."""
    return SUITES.get(suite or "", GENERAL)


# The matmul precisions an experiment may run under. The harness verifies with TF32 off;
# the runner verifies under the experiment's own setting, eager included, so the fp64 rule
# (a multiple of eager's own error) follows it and `tol` does not change.
MATMUL_PRECISIONS = frozenset({"highest", "high", "medium"})

# Precisions whose eager results compare NaN as unequal (the harness's --float32 turns
# equal_nan off; every other precision leaves it on).
NAN_UNEQUAL_PRECISIONS = frozenset({"fp32"})

# Output types of which only these fields are compared (the harness skips a question
# answering model's start and end logits, "very prone to inaccuracies", and checks the loss).
FIELDS_COMPARED: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"QuestionAnsweringModelOutput": ("loss",)})
