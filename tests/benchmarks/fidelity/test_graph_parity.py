"""benchmarks/fidelity/graph_parity.py: the graphs each tool hands the compiler, compared on the
CPU.

The end-to-end test runs both sides for real (the harness imported from
../shared/reference/dynamobench beside the clone, as CI has it): minutes of CPU.
"""

from __future__ import annotations

import pytest

from benchmarks.fidelity import graph_parity as graphs
from benchmarks.fidelity.workload_parity import DEFAULT_REFERENCE
from tests.conftest import words_printed_by


def graph(outputs=("float32[]",), autocast=True, forward=("aten.mm.default:bfloat16",),
          backward=None) -> dict:
    record = {"outputs": list(outputs), "autocast": autocast, "forward": list(forward)}
    if backward is not None:
        record["backward"] = list(backward)
    return record


def test_the_same_graphs_are_the_same_and_a_graph_captured_again_counts_once():
    theirs = [graph(), graph()]
    assert graphs.compare(theirs, [graph()]) == []
    assert graphs.summary(theirs) == "1/1/0"


def test_a_graph_that_returns_more_than_the_loss_is_a_difference():
    # What ours did before 5deb4b4: autocast entered outside, the logits returned too.
    theirs = [graph(outputs=["float32[]"])]
    mine = [graph(outputs=["float32[]", "bfloat16[2, 128, 30522]"], autocast=False)]
    assert graphs.compare(theirs, mine) == [
        "graph 0 outputs: ['float32[]'] vs ['float32[]', 'bfloat16[2, 128, 30522]']"]
    assert graphs.notes(theirs, mine) == [
        "graph 0: autocast entered inside the graph in the harness, outside in ours"]


def test_autocast_entered_around_the_same_operators_is_a_note_not_a_difference():
    # Ours' inference enters autocast around the compiled module, the harness inside its
    # compiled forward_pass: the same operators run.
    theirs, mine = [graph(autocast=True)], [graph(autocast=False)]
    assert graphs.compare(theirs, mine) == []
    assert graphs.notes(theirs, mine) != []
    assert graphs.notes(theirs, theirs) == []


def test_operators_that_differ_are_named_with_their_counts():
    theirs = [graph(forward=["aten.bmm.default:bfloat16"] * 2 + ["aten.add.Tensor:float32"],
                    backward=["aten.mm.default:bfloat16"])]
    mine = [graph(forward=["aten.bmm.default:float32"] * 2 + ["aten.add.Tensor:float32"],
                  backward=["aten.mm.default:bfloat16"])]
    assert graphs.compare(theirs, mine) == [
        "graph 0 forward: 3 vs 3 operators; harness minus ours: "
        "aten.bmm.default:bfloat16 +2, aten.bmm.default:float32 -2"]
    reordered = [graph(forward=["b:-", "a:-"])]
    assert graphs.compare([graph(forward=["a:-", "b:-"])], reordered) == [
        "graph 0 forward: 2 vs 2 operators; the same operators in another order"]


def test_a_missing_backward_and_another_count_of_graphs_are_differences():
    assert graphs.compare([graph(backward=["x:-"]), graph(forward=["y:-"])], [graph()]) == [
        "graphs: 2 vs 1", "graph 0 backward: 1 vs none operators"]


def test_an_input_in_another_layout_is_a_difference():
    import torch

    image = torch.zeros(2, 3, 8, 8)
    contiguous = graphs.describe_layout(image)
    channels_last = graphs.describe_layout(image.to(memory_format=torch.channels_last))
    assert contiguous == "float32[2, 3, 8, 8]"
    assert channels_last == "float32[2, 3, 8, 8] stride[192, 1, 24, 3]"
    weight = graphs.describe_layout(torch.zeros(4, 3))
    theirs = [dict(graph(), inputs=[contiguous, weight])]
    mine = [dict(graph(), inputs=[channels_last, weight])]
    assert graphs.compare(theirs, mine) == [
        f"graph 0 inputs: 1 of 2 differ; the first, input 0: {contiguous} vs {channels_last}"]
    assert graphs.compare(theirs, [dict(graph(), inputs=[contiguous])]) == [
        "graph 0 inputs: 2 vs 1"]
    assert graphs.compare(theirs, theirs) == []


def test_a_compiler_setting_that_differs_is_a_difference_named_with_both_values():
    settings = graphs.compiler_settings()
    assert settings["dynamo.specialize_float"] in ("True", "False")
    assert "inductor.max_autotune" in settings and "matmul.fp32_precision" in settings
    # What importing torch_xla does to dynamo's settings (the harness imports it if it can).
    with_xla = dict(settings, **{"dynamo.specialize_float": "True",
                                 "dynamo.automatic_dynamic_shapes": "False"})
    without = dict(settings, **{"dynamo.specialize_float": "False",
                                "dynamo.automatic_dynamic_shapes": "True"})
    theirs, mine = [dict(graph(), settings=with_xla)], [dict(graph(), settings=without)]
    assert graphs.compare(theirs, mine) == [
        "graph 0 settings: dynamo.automatic_dynamic_shapes False vs True; "
        "dynamo.specialize_float True vs False"]
    assert graphs.compare(mine, mine) == []


def test_precision_follows_the_gpu_table():
    hf, timm = (graphs.ListedModel("huggingface", "BertForMaskedLM", "BertForMaskedLM", 32),
                graphs.ListedModel("timm", "repvgg_a2", "repvgg_a2", 128))
    assert [graphs.precision_of(hf, "eval"), graphs.precision_of(hf, "train"),
            graphs.precision_of(timm, "eval")] == ["bf16", "amp", "amp"]


def test_where_each_graph_starts_is_named_where_the_counts_differ():
    harness_frame = "resume_in_forward_and_backward_pass_at_420 (timm_models.py:420)"
    model_frame = "resume_in__train_iteration_at_171 (torch_device.py:171)"
    after_loss = "resume_in__train_iteration_at_178 (torch_device.py:178)"
    theirs = [dict(graph(), frame=harness_frame)]
    mine = [dict(graph(), frame=model_frame), dict(graph(forward=["x:-"]), frame=after_loss)]
    assert graphs.graph_starts(theirs, mine) == [
        f"harness graph 0 starts in {harness_frame}", f"ours graph 0 starts in {model_frame}",
        f"ours graph 1 starts in {after_loss}"]
    # Frames are named differently in the two tools: not a difference by themselves.
    assert graphs.graph_starts(theirs, mine[:1]) == []
    assert graphs.compare(theirs, mine[:1]) == []


def test_graph_breaks_that_differ_are_shown_by_reason():
    theirs = {"Unsupported Tensor.backward() call": 1, "Attempted to inline function": 2}
    mine = {"Unsupported Tensor.backward() call": 1}
    assert graphs.break_differences(theirs, mine) == [
        "harness breaks 3: Attempted to inline function x2; Unsupported Tensor.backward() call x1",
        "ours breaks 1: Unsupported Tensor.backward() call x1"]
    assert graphs.break_differences(mine, dict(mine)) == []


def test_the_harness_optimizer_made_on_the_cpu_steps_without_capturable():
    import torch

    parameters = [torch.nn.Parameter(torch.ones(3))]
    optimizer = torch.optim.Adam(parameters, lr=0.01, capturable=True, foreach=True)
    graphs.without_capturable(optimizer)
    parameters[0].grad = torch.ones(3)
    optimizer.step()
    assert optimizer.param_groups[0]["capturable"] is False
    assert optimizer.param_groups[0]["foreach"] is True
    assert parameters[0].detach().lt(1).all()


needs_harness = pytest.mark.skipif(not (DEFAULT_REFERENCE / "common.py").exists(),
                                   reason=f"the harness is not beside the clone "
                                          f"({DEFAULT_REFERENCE})")


@pytest.mark.e2e
@needs_harness
def test_an_unknown_model_is_named_and_fails(capsys):
    with pytest.raises(SystemExit) as raised:
        graphs.main(["--model", "NoSuchModel", "--test", "train"])
    assert "NoSuchModel" in str(raised.value)


@pytest.mark.e2e
@pytest.mark.long
@needs_harness
def test_distilbert_training_hands_inductor_the_harness_graphs(capsys):
    # Each side in its own process, for real: dynamo's graph, AOTAutograd's forward and
    # backward, operator by operator (before 5deb4b4 ours returned the logits too).
    status = graphs.main(["--model", "DistilBertForMaskedLM", "--test", "train"])
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if "DistilBertForMaskedLM" in line)
    assert status == 0, printed
    assert row.split()[-1] == "same", printed
    harness_summary, our_summary = row.split()[3], row.split()[4]
    assert harness_summary == our_summary
    count, forward, backward = (int(part) for part in our_summary.split("/"))
    assert count == 1 and forward > 500 and backward > 500, row


@pytest.mark.e2e
def test_the_recorder_takes_a_max_pooling_model_through_training():
    # Inductor's decomposition of max_pool2d consults its lowerings, which nothing imports
    # unless inductor itself compiles: inception_v3's training failed so in both tools. A
    # fresh process, since another test here may have imported them already.
    code = ("import torch\n"
            "from benchmarks.fidelity.graph_parity import GraphRecorder\n"
            "recorder = GraphRecorder()\n"
            "model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.MaxPool2d(3, 2))\n"
            "compiled = torch.compile(model, backend=recorder.backend)\n"
            "compiled(torch.randn(2, 3, 16, 16)).sum().backward()\n"
            "graph = recorder.graphs[0]\n"
            "from torch._dynamo.utils import counters\n"
            "print(len(recorder.graphs), any('max_pool' in op for op in graph['forward']),"
            " any('max_pool2d' in op for op in graph['backward']),"
            " sum(counters['graph_break'].values()))")
    # No graph break of the recorder's own counts as the model's (the backward is compiled
    # on its first call, inside a compiled frame's backward).
    assert words_printed_by(code) == ["1", "True", "True", "0"]


def test_the_recorded_graphs_stand_in_with_outputs_of_their_layouts_and_run_nothing():
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils._python_dispatch import TorchDispatchMode

    def step(x, y):
        return (x @ y).to(torch.bfloat16), x.t(), None

    inputs = (torch.randn(4, 3), torch.randn(3, 5))
    graph = make_fx(step)(*inputs)
    ran = []

    class Operators(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ran.append(str(func))
            return func(*args, **(kwargs or {}))

    with Operators():
        stood_in = graphs.outputs_only(graph)(*inputs)
    expected = graph(*inputs)
    assert [(value.shape, value.stride(), value.dtype) for value in stood_in[:2]] == [
        (value.shape, value.stride(), value.dtype) for value in expected[:2]]
    assert stood_in[2] is None
    assert ran == ["aten.empty_strided.default"] * 2


@pytest.mark.e2e
@pytest.mark.slow
@needs_harness
def test_timm_training_with_each_tools_optimizer_makes_the_same_graphs(capsys):
    """Slow tier (-m slow; about 110 s of two compiles): `make test` keeps the fix it checks
    through tests/models/test_suites_cli_timm.py's sweep that must record the harness's graph count,
    and graph_parity's comparison through the DistilBERT training test above."""
    # bf16 (no autocast in the harness) with each tool's CUDA optimizer made on the CPU: the
    # model and Adam's step, two graphs in both. Ours made three before it entered autocast
    # only with amp: a disabled one made the frame resumed after the loss a graph of its own.
    status = graphs.main(["--model", "mobilenetv3_large_100", "--test", "train",
                          "--batch-size", "1", "--precision", "bf16", "--optimizer", "harness"])
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if "mobilenetv3_large_100" in line)
    assert status == 0, printed
    assert row.split()[-1] == "same", printed
    assert row.split()[3].split("/")[0] == row.split()[4].split("/")[0] == "2", row
