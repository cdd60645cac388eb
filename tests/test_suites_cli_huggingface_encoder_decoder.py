"""A Hugging Face encoder-decoder (T5Small) through the real runner, eager and compiled
(aot_eager: why, in tests/test_suites_cli_huggingface.py), eval and train.

A file of its own: pytest-xdist (--dist loadfile) gives each file to one worker, and each
model's compiles take a while; in one file (one sweep of the three models) this was
the longest test of the suite, run on one core while the other had finished."""

import pytest

from tests.test_suites_cli_huggingface import runs_eager_and_compiled_in_eval_and_train

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)


@pytest.mark.long
def test_an_encoder_decoder_model_runs(tmp_path):
    runs_eager_and_compiled_in_eval_and_train(tmp_path, "T5Small")
