"""Hugging Face models through the real runner, eager and compiled (dynamo with its eager
backend), eval and train: an encoder (BertForMaskedLM), a decoder (DistillGPT2) and an
encoder-decoder (T5Small), in one sweep that the module's tests share.

The compiled stack is dynamo's eager backend, which runs the graphs dynamo captured as
they are: what these tests check of ours (the suite's inputs, outputs and loss, a backward
through the captured graphs, the lines) is the same under every backend, while AOTAutograd
(aot_eager) traces each model's joint graph (the file took 44 CPU-seconds with it, 40
without), and inductor on the CPU compiles each kernel with a C++ compiler; how a backend
lowers each model is PyTorch's own, and a model it failed on would give a failed line, not
a fault of the runner. Inductor (with AOTAutograd) on a real model runs in
tests/models/test_suites_cli_timm.py.

One sweep of the three models (one runner, one fork server that imports transformers), not a
sweep per model: each runner of its own started a server and imported torch and transformers
again, about 5 CPU-seconds per model. Its tests are marked long, so that this file starts
first (tests/conftest.py): a worker takes it while the others take the other long files."""

import pytest

from tests.models.test_suites_cli import by_key, sweep

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

MODELS = ("BertForMaskedLM", "DistillGPT2", "T5Small")


@pytest.fixture(scope="module")
def hf_lines(tmp_path_factory):
    """The lines of the module's sweep, by (model, dynamo, test)."""
    filters = [argument for model in MODELS for argument in ("-k", f"^{model}$")]
    return by_key(sweep(tmp_path_factory.mktemp("hf") / "hf", "--suite-name=huggingface",
                        *filters, "--dynamo=None", "--dynamo=eager", "--test=eval",
                        "--test=train"))


def runs_eager_and_compiled_in_eval_and_train(all_lines, model):
    lines = {key: line for key, line in all_lines.items() if key[0] == model}
    assert len(lines) == 4
    failed = {k: l["metrics"].get("error", "")[:300] for k, l in lines.items() if l["status"] != "ok"}
    assert not failed
    for line in lines.values():
        assert all(t > 0 for t in line["metrics"]["per_iter_time"])
    for test in ("eval", "train"):  # the compiled lines ran dynamo's graphs
        assert lines[(model, "eager", test)]["summary"]["dynamo_graph_count"] >= 1


@pytest.mark.long
def test_the_sweep_holds_the_lines_of_the_three_models_and_no_other(hf_lines):
    assert {key[0] for key in hf_lines} == set(MODELS) and len(hf_lines) == 4 * len(MODELS)


@pytest.mark.long
def test_an_encoder_model_runs(hf_lines):
    runs_eager_and_compiled_in_eval_and_train(hf_lines, "BertForMaskedLM")


@pytest.mark.long
def test_a_decoder_model_runs(hf_lines):
    runs_eager_and_compiled_in_eval_and_train(hf_lines, "DistillGPT2")


@pytest.mark.long
def test_an_encoder_decoder_model_runs(hf_lines):
    runs_eager_and_compiled_in_eval_and_train(hf_lines, "T5Small")
