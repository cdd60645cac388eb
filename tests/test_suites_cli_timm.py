"""A timm model through the real runner, eager and inductor, eval and train.

A file of its own: pytest-xdist (--dist loadfile) gives each file to one worker, and this test
takes minutes; beside the other tests of the suites (tests/test_suites_cli.py) it held up one
worker while the other had finished."""

import pytest

from tests.test_suites_cli import by_key, sweep

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)


@pytest.mark.long
def test_timm_model_runs_eager_and_inductor_in_eval_and_train(tmp_path):
    timm = sweep(tmp_path / "timm", "--suite-name=timm", "-k", "^deit_tiny", "--dynamo=None",
                 "--dynamo=inductor", "--test=eval", "--test=train")
    lines = by_key(timm)
    assert set(lines) == {("deit_tiny_patch16_224", d, t)
                          for d in (None, "inductor") for t in ("eval", "train")}
    for line in lines.values():
        assert line["status"] == "ok", line["metrics"].get("error")
        assert line["experiment"]["batch_size"] == 4  # the reduced cap, recorded as used
        assert line["model"]["reduced"] is True  # the suite option, in the identity
    # Every line says what it ran: the same work for eager and inductor; training counts
    # forward and backward.
    flops = {key: line["workload"]["flops_per_iteration"] for key, line in lines.items()}
    for test in ("eval", "train"):
        assert flops[("deit_tiny_patch16_224", None, test)] == \
            flops[("deit_tiny_patch16_224", "inductor", test)] > 0
    assert flops[("deit_tiny_patch16_224", None, "train")] > \
        2 * flops[("deit_tiny_patch16_224", None, "eval")]
    assert lines[("deit_tiny_patch16_224", None, "eval")]["workload"]["inputs"][0]["shape"] == \
        [4, 3, 64, 64]
