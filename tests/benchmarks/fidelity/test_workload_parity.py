"""Our suites build the work PyTorch's harness builds: benchmarks/fidelity/workload_parity.py on a
subset of its lists that covers every head and kind of input of both suites.

It imports the harness from ../shared/reference/dynamobench beside the clone (as CI has
it) and builds every model twice on meta or fake tensors, so no weights are made. It starts
no process but takes about a minute of CPU, so it is in the end-to-end tier.
"""

from __future__ import annotations

import os

import pytest

from benchmarks.fidelity import workload_parity as parity
from tests.conftest import words_printed_by

#: (harness name, test): a masked LM, a causal LM fed its pad id (Roberta), a sequence
#: classifier with pad id 0, an encoder-decoder fed decoder ids, a question-answering head
#: counted on fake tensors (GPT-J reads values), Bart's end-of-sequence ids; timm: a
#: convolutional classifier, a tagged configuration, and one without a head (DINOv2).
SUBSET = (
    ("BertForMaskedLM", "train"), ("RobertaForCausalLM", "eval"),
    ("GPT2ForSequenceClassification", "eval"), ("T5ForConditionalGeneration", "eval"),
    ("GPTJForQuestionAnswering", "eval"), ("BartForCausalLM", "eval"),
    ("mobilenetv2_100", "train"), ("convnextv2_nano.fcmae_ft_in22k_in1k", "eval"),
    ("vit_base_patch14_dinov2.lvd142m", "eval"),
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (parity.DEFAULT_REFERENCE / "common.py").exists(),
                       reason=f"the harness is not beside the clone ({parity.DEFAULT_REFERENCE})"),
]


@pytest.fixture(scope="module")
def harness():
    """The harness, and this process's variables put back after the module: where a test
    before imported torch_xla, the harness's import of it is not hidden, and it sets
    PJRT_DEVICE, XLA_FLAGS, PJRT_DYNAMIC_PLUGINS and others in os.environ, which every runner
    a later test of this worker started would inherit."""
    saved = dict(os.environ)
    yield parity.Harness(parity.DEFAULT_REFERENCE.resolve())
    os.environ.clear()
    os.environ.update(saved)


def test_the_harness_is_imported_without_torch_xla_as_on_the_card():
    # Its common.py imports torch_xla where it can; that import turns dynamo's
    # automatic_dynamic_shapes off and specialize_float on, and sets PJRT_DEVICE. The card
    # has no torch_xla.
    code = ("import os, sys, torch\n"
            "from benchmarks.fidelity import workload_parity as parity\n"
            "config = torch._dynamo.config\n"
            "before = (config.automatic_dynamic_shapes, config.specialize_float)\n"
            "parity.Harness(parity.DEFAULT_REFERENCE.resolve())\n"
            "print(before == (config.automatic_dynamic_shapes, config.specialize_float),"
            " 'torch_xla' in sys.modules, 'PJRT_DEVICE' in os.environ)\n"
            "import importlib.util; print(importlib.util.find_spec('torch_xla') is not None)")
    env = {name: value for name, value in os.environ.items() if name != "PJRT_DEVICE"}
    assert words_printed_by(code, env) == ["True", "False", "False", "True"]


@pytest.fixture(scope="module")
def listed():
    return {model.harness_name: model for model in parity.listed_models(parity.DEFAULT_REFERENCE)}


@pytest.mark.parametrize("name,test", SUBSET)
def test_same_parameters_inputs_and_flops_as_the_harness(harness, listed, name, test):
    row = parity.parity_row(harness, None, listed[name], test,
                            parity.load_differences(parity.DEFAULT_DIFFERENCES))
    assert row.harness_error is None and row.our_error is None, (row.harness_error, row.our_error)
    assert row.status.split(" (")[0] in ("same", "explained"), row.differences
    assert row.our_flops and row.our_flops == row.harness_flops


def test_a_model_the_harness_cannot_build_offline_is_listed_with_its_error(harness, listed):
    """T5Small is one of the dashboard's names the harness maps through the hub."""
    row = parity.parity_row(harness, None, listed["T5Small"], "eval", {})
    assert row.status == "harness cannot build" and "T5Small" in row.harness_error
    assert not row.differences


def test_a_difference_fails_unless_listed_with_its_reason(tmp_path):
    theirs = {"parameters": {"count": 2}, "buffers": {}, "inputs": [], "flops_per_iteration": 4}
    ours = {"parameters": {"count": 3}, "buffers": {}, "inputs": [], "flops_per_iteration": 4}
    assert parity.compare(theirs, ours) == ["parameters.count: 2 vs 3"]
    listed_file = tmp_path / "differences.json"
    listed_file.write_text('{"differences": [{"model": "m", "test": "*", '
                           '"field": "parameters.count", "reason": "measured: ..."}]}')
    assert ("m", "train") in parity.load_differences(listed_file)


def test_different_eval_outputs_are_a_difference():
    base = {"parameters": {}, "buffers": {}, "inputs": [], "flops_per_iteration": 4}
    theirs = {**base, "outputs": ["logits: tensor [2] float32", "cache: EncoderDecoderCache"]}
    ours = {**base, "outputs": ["logits: tensor [2] float32"]}
    assert parity.compare(theirs, ours) == [f"outputs: {theirs['outputs']} vs {ours['outputs']}"]
    assert parity.compare({**base, "outputs": None}, ours) == []


def test_the_harness_per_model_inductor_settings_are_read_and_set_back(harness, listed):
    """The harness's load_model sets inductor's emulate_precision_casts for DINOv2 (its
    timm_models.yaml): the signature carries it, and the next model starts from inductor's own."""
    from torch._inductor import config

    before = config.get_config_copy()
    dinov2 = harness.signature(listed["vit_base_patch14_dinov2.lvd142m"], "eval")
    assert dinov2["inductor_settings"] == {"emulate_precision_casts": True}
    assert config.get_config_copy() == before
    deit = harness.signature(listed["deit_tiny_patch16_224.fb_in1k"], "eval")
    assert deit["inductor_settings"] == {}


def test_different_inductor_settings_are_a_difference():
    base = {"parameters": {}, "buffers": {}, "inputs": [], "flops_per_iteration": 4}
    theirs = {**base, "inductor_settings": {"emulate_precision_casts": True}}
    assert parity.compare(theirs, {**base, "inductor_settings": {}}) == [
        "inductor_settings: {'emulate_precision_casts': True} vs {}"]
    assert parity.compare(theirs, dict(theirs)) == []


def test_dropping_with_other_probabilities_is_a_difference():
    """As many masks, drawn at other probabilities: fused attention's kernel time depends on
    them (docs/fidelity.md, "1. The same work")."""
    base = {"parameters": {}, "buffers": {}, "inputs": [], "flops_per_iteration": 4,
            "random_operators": 19, "active_dropout": 0}
    theirs = {**base, "dropout_probabilities": {"0.1": 19}}
    assert parity.compare(theirs, {**base, "dropout_probabilities": {"0": 19}}) == [
        "dropout_probabilities: {'0.1': 19} vs {'0': 19}"]
    assert parity.compare(theirs, dict(theirs)) == []
