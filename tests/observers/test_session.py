"""The observers of one experiment: which are built, and failures turned into notes."""

import pytest

torch = pytest.importorskip("torch")

from backends.base import PreparedModel  # noqa: E402
from core.config import ExperimentConfig, RunSettings  # noqa: E402
from observers.session import ExperimentObservers  # noqa: E402

import backends  # noqa: E402

EAGER = ExperimentConfig("cpu", None, None, None, "eval")
AOT_EAGER = ExperimentConfig("cpu", None, "aot_eager", None, "eval")
LAZY = ExperimentConfig("cpu", "PJRT", None, None, "eval")


class Model(PreparedModel):
    def __init__(self, fallbacks=None):
        self.fallbacks = fallbacks

    def inputs_to_device(self, inputs):
        return inputs

    def step(self, device_inputs):
        return torch.ones(3).relu()

    def sync_run(self, last_result):
        pass

    def fallback_operators(self):
        if isinstance(self.fallbacks, Exception):
            raise self.fallbacks
        return self.fallbacks


def observers_of(experiment, settings, folder):
    return ExperimentObservers(backends.stack_for(experiment), experiment, settings, folder)


def run(observers, prepared, repeat=2):
    """Drive the hooks as the timing loop does; what every observer gave, both objects."""
    for index in range(repeat):
        observers.before_timed_run(index)
        result = prepared.step(None)
        observers.after_timed_run(index)
        observers.timed_run_output(index, result)
    observers.after_timed_runs(lambda: prepared.step(None), [None])
    metrics = observers.metrics()
    return {**metrics, **observers.summary()}


def test_a_failing_observer_leaves_a_note_and_the_others_go_on(tmp_path):
    settings = RunSettings(repeat=2, observe={"profile_cuda_cpu_individual_ops": True,
                                              "collect_dynamo_counters": True})
    observers = observers_of(AOT_EAGER, settings, tmp_path)
    observers.attach(Model(fallbacks=RuntimeError("no metrics here")))
    metrics = run(observers, Model())
    assert observers.notes == [
        "observer profiler failed and was stopped: RuntimeError: no metrics here"]
    assert "dynamo_counters" in metrics and "inductor_ops" not in metrics


def test_eager_gets_no_dynamo_summary_and_notes_for_dynamo_flags(tmp_path):
    observers = observers_of(EAGER, RunSettings(observe={"dump_dynamo_counters": True}), tmp_path)
    observers.attach(Model())
    assert run(observers, Model()) == {}
    assert len(observers.notes) == 1 and observers.notes[0].startswith("--dump-dynamo-counters")
    assert list(tmp_path.iterdir()) == []


def test_dynamo_stacks_always_get_the_summary(tmp_path):
    observers = observers_of(AOT_EAGER, RunSettings(), tmp_path)
    observers.attach(Model())
    metrics = run(observers, Model())
    assert {"dynamo_graph_count", "dynamo_unique_graphs", "dynamo_graph_breaks",
            "dynamo_graph_break_reasons", "dynamo_recompiles"} <= set(metrics)
    assert observers.notes == []


def test_a_stack_without_a_metrics_report_says_so(tmp_path):
    observers = observers_of(LAZY, RunSettings(observe={"dump_pytorch_xla_metrics": True,
                                                        "save_ir_format": "text"}), tmp_path)
    assert (tmp_path / "ir").is_dir()  # torch_xla writes its IR file there
    observers.attach(Model())  # the base PreparedModel reports no metrics
    run(observers, Model())
    assert observers.notes == ["--dump-pytorch-xla-metrics: the stack gave no metrics report"]


def test_the_debug_stack_gets_no_dynamo_summary(tmp_path):
    debug = ExperimentConfig("cpu", None, "debug_perturb", None, "eval")
    observers = observers_of(debug, RunSettings(), tmp_path)
    observers.attach(Model())
    assert run(observers, Model()) == {}


def test_save_output_writes_each_timed_run_output(tmp_path):
    settings = RunSettings(repeat=2, observe={"save_output": True})
    observers = observers_of(EAGER, settings, tmp_path)
    observers.attach(Model())
    assert run(observers, Model()) == {}
    for index in range(2):
        saved = torch.load(tmp_path / f"run-{index}" / "output.pt")
        assert torch.equal(saved, torch.ones(3))
    assert observers.notes == []
