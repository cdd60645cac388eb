"""A Hugging Face encoder (BertForMaskedLM) through the real runner, eager and inductor, eval and
train (the decoder and the encoder-decoder: the files beside this one).

A file of its own: pytest-xdist (--dist loadfile) gives each file to one worker, and each
model's inductor compiles take minutes; in one file (one sweep of the three models) this was
the longest test of the suite, run on one core while the other had finished."""

import pytest

from tests.test_suites_cli import by_key, sweep

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)


def runs_eager_and_inductor_in_eval_and_train(tmp_path, model):
    hf = sweep(tmp_path / "hf", "--suite-name=huggingface", "-k", f"^{model}$", "--dynamo=None",
               "--dynamo=inductor", "--test=eval", "--test=train")
    lines = by_key(hf)
    assert len(lines) == 4
    failed = {k: l["metrics"].get("error", "")[:300] for k, l in lines.items() if l["status"] != "ok"}
    assert not failed
    for line in lines.values():
        assert all(t > 0 for t in line["metrics"]["per_iter_time"])


@pytest.mark.long
def test_an_encoder_model_runs(tmp_path):
    runs_eager_and_inductor_in_eval_and_train(tmp_path, "BertForMaskedLM")
