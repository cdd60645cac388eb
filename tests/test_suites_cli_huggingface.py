"""A Hugging Face encoder (BertForMaskedLM) through the real runner, eager and compiled (dynamo
with aot_eager), eval and train (the decoder and the encoder-decoder: the files beside this one).

The compiled stack is aot_eager, not inductor: what these tests check of ours (the suite's
inputs, outputs and loss, a backward through dynamo's graph, the lines) is the same under
both, while on the CPU inductor spends its time compiling each kernel with a C++ compiler
(2.9x to 3.2x the CPU time of these tests); how inductor lowers each model is PyTorch's own,
and a model it failed on would give a failed line, not a fault of the runner. Inductor on a
real model runs in tests/test_suites_cli_timm.py.

A file of its own: pytest-xdist (--dist loadfile) gives each file to one worker, and each
model's compiles take a while; in one file (one sweep of the three models) this was the
longest test of the suite, run on one core while the other had finished."""

import pytest

from tests.test_suites_cli import by_key, sweep

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)


def runs_eager_and_compiled_in_eval_and_train(tmp_path, model):
    hf = sweep(tmp_path / "hf", "--suite-name=huggingface", "-k", f"^{model}$", "--dynamo=None",
               "--dynamo=aot_eager", "--test=eval", "--test=train")
    lines = by_key(hf)
    assert len(lines) == 4
    failed = {k: l["metrics"].get("error", "")[:300] for k, l in lines.items() if l["status"] != "ok"}
    assert not failed
    for line in lines.values():
        assert all(t > 0 for t in line["metrics"]["per_iter_time"])
    for test in ("eval", "train"):  # the compiled lines ran dynamo's graphs
        assert lines[(model, "aot_eager", test)]["summary"]["dynamo_graph_count"] >= 1


@pytest.mark.long
def test_an_encoder_model_runs(tmp_path):
    runs_eager_and_compiled_in_eval_and_train(tmp_path, "BertForMaskedLM")
