"""A timm model through the real runner, eager and compiled, eval and train.

Compiled by AOTAutograd's eager backend: dynamo's graphs and AOTAutograd's forward and
backward, as inductor gets them, without inductor's C++ build (a minute of CPU here for this
model, against 17 s for the whole test). The runner's inductor path (its settings, freezing,
compile workers) is model-agnostic and is tested on the builtin models (tests/cli/test_cli.py,
tests/backends/test_freezing.py); the same sweep with inductor is in the slow tier (-m slow).

A file of its own: pytest-xdist (--dist loadfile) gives each file to one worker, and this test
takes minutes; beside the other tests of the suites (tests/models/test_suites_cli.py) it held up one
worker while the other had finished."""

import pytest

from tests.models.test_suites_cli import by_key, sweep

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)


def check_eager_and_compiled(tmp_path, backend: str) -> None:
    timm = sweep(tmp_path / "timm", "--suite-name=timm", "-k", "^deit_tiny", "--dynamo=None",
                 f"--dynamo={backend}", "--test=eval", "--test=train")
    lines = by_key(timm)
    assert set(lines) == {("deit_tiny_patch16_224", d, t)
                          for d in (None, backend) for t in ("eval", "train")}
    for line in lines.values():
        assert line["status"] == "ok", line["metrics"].get("error")
        assert line["experiment"]["batch_size"] == 4  # the reduced cap, recorded as used
        assert line["model"]["reduced"] is True  # the suite option, in the identity
    # Every line says what it ran: the same work for eager and compiled; training counts
    # forward and backward.
    flops = {key: line["workload"]["flops_per_iteration"] for key, line in lines.items()}
    for test in ("eval", "train"):
        assert flops[("deit_tiny_patch16_224", None, test)] == \
            flops[("deit_tiny_patch16_224", backend, test)] > 0
    assert flops[("deit_tiny_patch16_224", None, "train")] > \
        2 * flops[("deit_tiny_patch16_224", None, "eval")]
    assert lines[("deit_tiny_patch16_224", None, "eval")]["workload"]["inputs"][0]["shape"] == \
        [4, 3, 64, 64]
    # Compiled training without amp (fp32, the suite's default) makes the harness's one
    # graph (why: the test below, which checks bf16; the count is dynamo's, whichever
    # backend compiles the graphs).
    training = lines[("deit_tiny_patch16_224", backend, "train")]
    assert training["experiment"]["precision"] == "fp32"
    assert (training["summary"]["dynamo_graph_count"],
            training["summary"]["dynamo_unique_graphs"]) == (1, 1), training["summary"]


@pytest.mark.long
def test_timm_model_runs_eager_and_compiled_in_eval_and_train(tmp_path):
    check_eager_and_compiled(tmp_path, "aot_eager")


@pytest.mark.slow
def test_timm_model_runs_eager_and_inductor_in_eval_and_train(tmp_path):
    check_eager_and_compiled(tmp_path, "inductor")


def test_compiled_training_without_amp_makes_the_graphs_of_the_harness(tmp_path):
    # Off CUDA neither tool trains with an optimizer: the harness's forward_and_backward_pass
    # compiles one graph (the model; the loss breaks, as its reduce_to_scalar_loss is skipped),
    # with no autocast at all without amp (its nullcontext). Ours entered a disabled autocast
    # there: the frame dynamo resumes in after the loss entered and left it again, a second
    # graph compiled and called every iteration (timm training on 4 H200: 3 graphs against 2).
    # fp32 is checked on the compiled training line of the test above; bf16 here.
    lines = sweep(tmp_path / "graphs", "--suite-name=timm", "-k", "^deit_tiny",
                  "--dynamo=aot_eager", "--test=train", "--precision=bf16")
    assert sorted(line["experiment"]["precision"] for line in lines) == ["bf16"]
    for line in lines:
        assert line["status"] == "ok", line["metrics"].get("error")
        summary = line["summary"]
        graphs = {key: value for key, value in summary.items() if key.startswith("dynamo_")}
        assert (graphs["dynamo_graph_count"], graphs["dynamo_unique_graphs"]) == (1, 1), \
            (line["experiment"]["precision"], graphs)
