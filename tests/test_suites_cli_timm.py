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
    # Compiled training without amp (fp32, the suite's default) makes the harness's one
    # graph (why: the test below, which checks bf16).
    training = lines[("deit_tiny_patch16_224", "inductor", "train")]
    assert training["experiment"]["precision"] == "fp32"
    assert (training["summary"]["dynamo_graph_count"],
            training["summary"]["dynamo_unique_graphs"]) == (1, 1), training["summary"]


def test_compiled_training_without_amp_makes_the_graphs_of_the_harness(tmp_path):
    # Off CUDA neither tool trains with an optimizer: the harness's forward_and_backward_pass
    # compiles one graph (the model; the loss breaks, as its reduce_to_scalar_loss is skipped),
    # with no autocast at all without amp (its nullcontext). Ours entered a disabled autocast
    # there: the frame dynamo resumes in after the loss entered and left it again, a second
    # graph compiled and called every iteration (timm training on 4 H200: 3 graphs against 2).
    # fp32 is checked on the inductor training line of the test above (the same graphs: the
    # count is dynamo's, whichever backend compiles them); bf16 here, compiled by aot_eager.
    lines = sweep(tmp_path / "graphs", "--suite-name=timm", "-k", "^deit_tiny",
                  "--dynamo=aot_eager", "--test=train", "--precision=bf16")
    assert sorted(line["experiment"]["precision"] for line in lines) == ["bf16"]
    for line in lines:
        assert line["status"] == "ok", line["metrics"].get("error")
        summary = line["summary"]
        graphs = {key: value for key, value in summary.items() if key.startswith("dynamo_")}
        assert (graphs["dynamo_graph_count"], graphs["dynamo_unique_graphs"]) == (1, 1), \
            (line["experiment"]["precision"], graphs)
