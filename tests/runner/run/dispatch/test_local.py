"""The local dispatcher: slots that share a GPU, the experiment that runs out of its
memory there, run again alone, and idle slots lent at the sweep's end."""

import dataclasses
import os
import threading

import pytest

from core.config import ExperimentConfig, ModelConfig, RunSettings
from runner.plan.matrix import PlannedExperiment
from runner.plan.slots import Slot
from runner.run.dispatch.local import GpuTurns, LocalDispatcher, SlotPool
from runner.run.executor import ExecutorOptions, ExperimentExecutor, SweepInfo
from tests.conftest import as_the_tests_runners

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


def gpu_slots(*gpus: str) -> list[Slot]:
    return [Slot(index, (index,), gpu, shares_device=True) for index, gpu in enumerate(gpus)]


def test_slots_are_lent_only_once_the_sweep_has_submitted_everything():
    slots = gpu_slots("0", "0")
    pool = SlotPool(slots, GpuTurns(), poll_seconds=0.05)
    pool.expect()
    lender = pool.take()
    assert pool.borrow(lender, lambda: False) is None
    calls = iter([True, True, False])
    assert pool.borrow(lender, lambda: next(calls)) is None  # backlog unknown: closed
    pool.set_backlog(1)
    calls = iter([True, True, False])
    assert pool.borrow(lender, lambda: next(calls)) is None
    pool.set_backlog(0)
    assert pool.borrow(lender, lambda: True) == slots[1]
    calls = iter([True, True, False])
    assert pool.borrow(lender, lambda: next(calls)) is None  # none left
    pool.put(slots[1])
    pool.expect()  # submitted, not started yet: its slot is not lent
    calls = iter([True, True, False])
    assert pool.borrow(lender, lambda: next(calls)) is None
    assert pool.take() == slots[1]


def test_only_slots_of_the_lenders_gpu_that_share_it_are_lent():
    slots = gpu_slots("0", "1") + [Slot(2, (2,), "0")]
    pool = SlotPool(slots, GpuTurns(), poll_seconds=0.05)
    pool.expect()
    lender = pool.take()
    pool.set_backlog(0)
    calls = iter([True, True, False])
    assert pool.borrow(lender, lambda: next(calls)) is None  # GPU 1's, and one not shared
    assert pool.borrow(Slot(9, (9,), "0"), lambda: True) is None  # an unshared lender
    assert pool.borrow(Slot(9, (9,), "1", shares_device=True), lambda: True) == slots[1]


def test_a_gpu_held_for_an_experiment_alone_lends_nothing():
    turns = GpuTurns()
    slots = gpu_slots("0", "0")
    pool = SlotPool(slots, turns, poll_seconds=0.05)
    pool.expect()
    lender = pool.take()
    pool.set_backlog(0)
    started, may_end = threading.Event(), threading.Event()

    def alone_run():
        with turns.alone("0"):
            started.set()
            may_end.wait(10)

    thread = _started(alone_run)
    assert started.wait(5)
    calls = iter([True, True, False])
    assert pool.borrow(lender, lambda: next(calls)) is None
    may_end.set()
    thread.join(5)
    assert pool.borrow(lender, lambda: True) == slots[1]


def test_a_borrower_gives_up_at_once_when_woken_with_nothing_left():
    slots = gpu_slots("0")
    pool = SlotPool(slots, GpuTurns(), poll_seconds=60)
    pool.expect()
    lender = pool.take()
    pool.set_backlog(0)
    wanted = threading.Event()
    wanted.set()
    answers = []
    thread = _started(lambda: answers.append(pool.borrow(lender, wanted.is_set)))
    assert not answers and thread.is_alive()
    wanted.clear()
    pool.wake()
    thread.join(5)
    assert answers == [None]


@pytest.fixture(scope="module")
def shared_gpu_lines(tmp_path_factory):
    """A fault that runs out of GPU memory and one that fails otherwise, each on one of two
    slots sharing GPU 0, and the same GPU fault on a slot of its own, in real children."""
    output = tmp_path_factory.mktemp("dispatch")
    with as_the_tests_runners() as pool:
        executor = ExperimentExecutor(
            ExecutorOptions(output_dir=output, timeout_seconds=120, start_method="forkserver",
                            server_pool=pool),
            RunSettings(repeat=1, warmup=1), SweepInfo(run_id="sweep-1"))
        return _shared_gpu_lines(executor)


def _shared_gpu_lines(executor: ExperimentExecutor) -> dict:
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


@pytest.mark.e2e
def test_at_the_sweeps_end_an_idle_slot_of_the_gpu_runs_a_later_process(tmp_path):
    """Real children: one experiment of 3 processes on two slots sharing GPU 0 (here a CPU
    experiment, whose slots never share a GPU in a sweep, stands in for a CUDA one)."""
    from core.contract import SPEC_FILE, ChildSpec, read_message

    cores = sorted(os.sched_getaffinity(0))
    slots = [Slot(index, (cores[index % len(cores)],), "0", shares_device=True)
             for index in range(2)]
    experiment = dataclasses.replace(EAGER, processes=3)
    with as_the_tests_runners() as pool:
        executor = ExperimentExecutor(
            ExecutorOptions(output_dir=tmp_path, timeout_seconds=120, start_method="forkserver",
                            server_pool=pool),
            RunSettings(repeat=2, warmup=1), SweepInfo(run_id="sweep-1"))
        dispatcher = LocalDispatcher(executor, slots)
        try:
            future = dispatcher.submit(PlannedExperiment(ModelConfig("builtin", "mlp"),
                                                         experiment, "eager"))
            dispatcher.set_backlog(0)
            line = future.result(timeout=300)
            dispatcher.close()
        finally:
            executor.close()
    assert line["status"] == "ok", line["metrics"].get("error")
    processes = line["summary"]["processes"]
    assert processes["count"] == 3 and len(processes["medians"]) == 3
    first, *later = processes["slots"]
    assert sorted(later) == [0, 1] and first in (0, 1)
    for key, slot in zip(("time", "time-2", "time-3"), processes["slots"]):
        spec = read_message(tmp_path / line["artifacts"][key] / SPEC_FILE, ChildSpec)
        assert spec.cpu_set == slots[slot].cpu_set, key
