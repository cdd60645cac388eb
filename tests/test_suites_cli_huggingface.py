"""Hugging Face encoder, decoder and encoder-decoder models through the real runner, eager and
inductor, eval and train.

A file of its own: pytest-xdist (--dist loadfile) gives each file to one worker, and this test
takes minutes; beside the other tests of the suites (tests/test_suites_cli.py) it held up one
worker while the other had finished."""

import pytest

from tests.test_suites_cli import by_key, sweep

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)


@pytest.mark.long
def test_encoder_decoder_and_encoder_decoder_models_run(tmp_path):
    hf = sweep(tmp_path / "hf", "--suite-name=huggingface", "-k", "^BertForMaskedLM$",
               "-k", "^DistillGPT2$", "-k", "^T5Small$", "--dynamo=None", "--dynamo=inductor",
               "--test=eval", "--test=train")
    lines = by_key(hf)
    assert len(lines) == 12
    failed = {k: l["metrics"].get("error", "")[:300] for k, l in lines.items() if l["status"] != "ok"}
    assert not failed
    for line in lines.values():
        assert all(t > 0 for t in line["metrics"]["per_iter_time"])
