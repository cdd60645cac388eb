"""The local dispatcher: slots that share a GPU, and the experiment that runs out of its
memory there, run again alone."""

import os
import threading

import pytest

from core.config import ExperimentConfig, ModelConfig, RunSettings
from runner.plan.matrix import PlannedExperiment
from runner.plan.slots import Slot
from runner.run.dispatch import GpuTurns, LocalDispatcher
from runner.run.executor import ExecutorOptions, ExperimentExecutor, SweepInfo

EAGER = ExperimentConfig("cpu", None, None, None, "eval", stack="eager")


def _started(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_gpu_run_alone_waits_for_its_shared_runs_and_holds_off_new_ones():
    turns = GpuTurns()
    shared_may_end, alone_started, late_started = threading.Event(), threading.Event(), threading.Event()
    alone_may_end, other_gpu_ran = threading.Event(), threading.Event()

    def shared_run():
        with turns.shared("0"):
            shared_may_end.wait(10)

    def alone_run():
        with turns.alone("0"):
            alone_started.set()
            alone_may_end.wait(10)

    def late_shared_run():
        with turns.shared("0"):
            late_started.set()

    def other_gpu_run():
        with turns.shared("1"):
            other_gpu_ran.set()

    running = _started(shared_run)
    alone = _started(alone_run)
    assert not alone_started.wait(0.3)  # the shared run on GPU 0 has not ended
    shared_may_end.set()
    assert alone_started.wait(5)
    late = _started(late_shared_run)
    other = _started(other_gpu_run)
    assert other_gpu_ran.wait(5)  # another GPU's slots go on
    assert not late_started.wait(0.3)  # GPU 0 is held alone
    alone_may_end.set()
    assert late_started.wait(5)
    for thread in (running, alone, late, other):
        thread.join(5)


@pytest.fixture(scope="module")
def shared_gpu_lines(tmp_path_factory):
    """A fault that runs out of GPU memory and one that fails otherwise, each on one of two
    slots sharing GPU 0, and the same GPU fault on a slot of its own, in real children."""
    output = tmp_path_factory.mktemp("dispatch")
    executor = ExperimentExecutor(ExecutorOptions(output_dir=output, timeout_seconds=120),
                                  RunSettings(repeat=1, warmup=1), SweepInfo(run_id="sweep-1"))
    cores = tuple(sorted(os.sched_getaffinity(0)))
    planned = {name: PlannedExperiment(ModelConfig("faults", name), EAGER, "eager")
               for name in ("gpu_oom", "raises")}
    try:
        shared = LocalDispatcher(executor, [Slot(0, cores, "0", shares_device=True),
                                            Slot(1, cores, "0", shares_device=True)])
        futures = {name: shared.submit(experiment) for name, experiment in planned.items()}
        lines = {name: future.result(timeout=300) for name, future in futures.items()}
        shared.close()
        alone = LocalDispatcher(executor, [Slot(0, cores, "0")])
        lines["gpu_oom on its own"] = alone.submit(planned["gpu_oom"]).result(timeout=300)
        alone.close()
    finally:
        executor.close()
    return lines


@pytest.mark.e2e
def test_an_experiment_out_of_gpu_memory_on_a_shared_gpu_runs_again_alone(shared_gpu_lines):
    line = shared_gpu_lines["gpu_oom"]
    assert line["status"] == "failed"
    assert "CUDA out of memory" in line["metrics"]["error"]
    assert any("ran out of GPU memory while GPU 0 was shared with other experiments"
               in note and "run again alone on it" in note for note in line["notes"])
    # The line is its second run's: its children's folders are those of attempt 2.
    assert line["artifacts"] and all(folder.endswith("-attempt2")
                                     for folder in line["artifacts"].values()), line["artifacts"]


@pytest.mark.e2e
def test_other_failures_and_unshared_gpus_are_not_run_again(shared_gpu_lines):
    for name in ("raises", "gpu_oom on its own"):
        line = shared_gpu_lines[name]
        assert line["status"] == "failed", name
        assert not any("run again alone" in note for note in line.get("notes") or ()), name
