"""The executor's timing processes share one compile-cache folder (no child is started:
run_child is replaced)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from core.config import ExperimentConfig, ModelConfig, RunSettings
from core.contract import SPEC_FILE, ChildError, ChildResult, ChildSpec, Role, read_message
from core.schema import Status
from runner.plan.matrix import PlannedExperiment
from runner.run.executor import ExecutorOptions, ExperimentExecutor
from runner.run.record.lines import SweepInfo
from runner.run.process.scratch import ScratchRoot
from runner.run.process.supervision import ChildOutcome


def executor(tmp_path: Path) -> ExperimentExecutor:
    (tmp_path / "scratch").mkdir()
    return ExperimentExecutor(ExecutorOptions(output_dir=tmp_path / "out"), RunSettings(),
                              SweepInfo(run_id="run"), scratch=ScratchRoot(tmp_path / "scratch"))


def planned() -> PlannedExperiment:
    experiment = ExperimentConfig(accelerator="cpu", xla=None, dynamo=None, torch_xla2=None,
                                  test="eval", stack="eager")
    return PlannedExperiment(ModelConfig("builtin", "mlp"), experiment, "eager")


def ok(median: float) -> ChildResult:
    return ChildResult(status=Status.OK, metrics={"per_iter_time": [1.0, median]},
                       summary={"cold_start_entries": 1})


def fake_children(runner: ExperimentExecutor, results: list[ChildResult], seen: list):
    def run_child(planned, role, slot=None, process=1, scratch=None, attempt=1):
        assert role is Role.TIME
        seen.append((process, scratch, scratch.is_dir() if scratch else None))
        folder = runner.child_folder(planned, role, process, attempt)
        return ChildOutcome(folder, returncode=0, result=results[process - 1], wall_seconds=2.0)

    runner.run_child = run_child


def test_processes_share_one_cache_folder_removed_at_the_end(tmp_path):
    runner = executor(tmp_path)
    seen: list = []
    fake_children(runner, [ok(0.1), ok(0.3), ok(0.2)], seen)
    outcome, outcomes = runner.time_processes(planned(), 3)
    assert [process for process, _, _ in seen] == [1, 2, 3]
    caches = {scratch for _, scratch, _ in seen}
    assert len(caches) == 1 and all(exists for _, _, exists in seen)
    assert not next(iter(caches)).exists()
    assert [o.folder.name for o in outcomes] == ["time", "time-2", "time-3"]
    assert outcome.result.summary["processes"]["medians"] == [0.1, 0.3, 0.2]
    assert outcome.wall_seconds == 6.0


def test_a_failed_first_process_ends_the_experiment(tmp_path):
    runner = executor(tmp_path)
    seen: list = []
    failed = ChildResult(status=Status.FAILED, error=ChildError("RuntimeError: boom"))
    fake_children(runner, [failed, ok(0.1)], seen)
    outcome, outcomes = runner.time_processes(planned(), 2)
    assert len(seen) == 1 and outcome.result is failed and len(outcomes) == 1


def test_one_process_gets_a_cache_of_its_own(tmp_path):
    runner = executor(tmp_path)
    seen: list = []
    fake_children(runner, [ok(0.1)], seen)
    outcome, _ = runner.time_processes(planned(), 1)
    assert seen == [(1, None, None)] and "processes" not in outcome.result.summary


def test_the_line_keeps_what_each_process_cost_and_how_long_it_took_to_exit(tmp_path):
    runner = executor(tmp_path)
    exits = iter([0.5, None, 2.25])

    def run_child(planned, role, slot=None, process=1, scratch=None, attempt=1):
        folder = runner.child_folder(planned, role, process, attempt)
        return ChildOutcome(folder, returncode=0, result=ok(0.1 * process),
                            wall_seconds=10.0 + process, exit_seconds=next(exits))

    runner.run_child = run_child
    outcome, _ = runner.time_processes(planned(), 3)
    processes = outcome.result.summary["processes"]
    assert processes["wall_seconds"] == [11.0, 12.0, 13.0]
    assert processes["exit_seconds"] == [0.5, None, 2.25]


def test_with_fresh_caches_each_process_compiles_from_an_empty_folder_of_its_own(tmp_path):
    runner = executor(tmp_path)
    seen: list = []
    fake_children(runner, [ok(0.1), ok(0.3), ok(0.2)], seen)
    fresh = planned()
    fresh = PlannedExperiment(fresh.model, dataclasses.replace(fresh.experiment,
                                                               process_caches="fresh"),
                              fresh.label)
    outcome, _ = runner.time_processes(fresh, 3)
    # run_child makes (and removes) a new cache folder for a process given none.
    assert seen == [(1, None, None), (2, None, None), (3, None, None)]
    assert outcome.result.summary["processes"]["medians"] == [0.1, 0.3, 0.2]


def test_only_later_processes_with_shared_caches_are_told_their_caches_are_warm(tmp_path):
    runner = executor(tmp_path)
    told = []

    def supervise(folder, scratch, start, keep_scratch, **options):  # no child is started
        told.append((folder.name, read_message(folder / SPEC_FILE, ChildSpec).warm_caches))
        return ChildOutcome(folder, returncode=0, result=ok(0.1), wall_seconds=1.0)

    runner._supervisor.run = supervise
    runner.time_processes(planned(), 3)
    fresh = planned()
    fresh = PlannedExperiment(fresh.model, dataclasses.replace(fresh.experiment,
                                                               process_caches="fresh"),
                              fresh.label)
    runner.time_processes(fresh, 2)
    assert told == [("time", False), ("time-2", True), ("time-3", True),
                    ("time", False), ("time-2", False)]


def sleeping_children(runner: ExperimentExecutor, seconds: float, runs: list):
    """Children that take `seconds` each, noting their process, slot and times."""
    import time

    def run_child(planned, role, slot=None, process=1, scratch=None, attempt=1):
        started = time.monotonic()
        time.sleep(seconds)
        runs.append((process, slot.index, started, time.monotonic()))
        folder = runner.child_folder(planned, role, process, attempt)
        return ChildOutcome(folder, returncode=0, result=ok(0.1 * process), wall_seconds=seconds)

    runner.run_child = run_child


def shared_pool(poll_seconds: float):
    from runner.plan.slots import Slot
    from runner.run.dispatch.local import GpuTurns, SlotPool

    slots = [Slot(index, (index,), "0", shares_device=True) for index in range(2)]
    pool = SlotPool(slots, GpuTurns(), poll_seconds=poll_seconds)
    pool.expect()
    return pool, pool.take()


def test_an_idle_slot_of_the_gpu_runs_later_processes_beside_the_experiments_own(tmp_path):
    runner = executor(tmp_path)
    pool, own = shared_pool(poll_seconds=30)
    pool.set_backlog(0)
    runs: list = []
    sleeping_children(runner, 0.5, runs)
    outcome, outcomes = runner.time_processes(planned(), 3, own, lender=pool)
    by_process = {process: (slot, start, end) for process, slot, start, end in runs}
    assert by_process[1][0] == own.index
    assert {by_process[2][0], by_process[3][0]} == {0, 1}
    assert by_process[1][2] <= min(by_process[2][1], by_process[3][1])  # after the first
    assert max(by_process[2][1], by_process[3][1]) < min(by_process[2][2], by_process[3][2])
    processes = outcome.result.summary["processes"]
    assert processes["slots"] == [own.index, by_process[2][0], by_process[3][0]]
    assert processes["medians"] == pytest.approx([0.1, 0.2, 0.3])
    assert [o.folder.name for o in outcomes] == ["time", "time-2", "time-3"]
    pool.expect()
    assert pool.take().index == 1  # the borrowed slot is back


def test_without_an_idle_slot_later_processes_run_in_turn_and_nothing_waits_for_a_loan(tmp_path):
    import time

    runner = executor(tmp_path)
    pool, own = shared_pool(poll_seconds=30)
    pool.expect()
    pool.take()  # the GPU's other slot runs another experiment
    pool.set_backlog(0)
    runs: list = []
    sleeping_children(runner, 0.2, runs)
    began = time.monotonic()
    outcome, _ = runner.time_processes(planned(), 3, own, lender=pool)
    assert time.monotonic() - began < 5  # the waiting borrower was woken, not polled out
    assert [(process, slot) for process, slot, _, _ in runs] == [(1, 0), (2, 0), (3, 0)]
    assert outcome.result.summary["processes"]["slots"] == [0, 0, 0]


def cuda_executor(tmp_path: Path, cores: int, **experiment) -> tuple[ExperimentExecutor,
                                                                     PlannedExperiment]:
    (tmp_path / "scratch").mkdir()
    runner = ExperimentExecutor(
        ExecutorOptions(output_dir=tmp_path / "out", cpu_set=tuple(range(cores))),
        RunSettings(), SweepInfo(run_id="run"), scratch=ScratchRoot(tmp_path / "scratch"))
    config = ExperimentConfig(accelerator="cuda", xla=None, dynamo=None, torch_xla2=None,
                              test="eval", stack="eager", **experiment)
    return runner, PlannedExperiment(ModelConfig("builtin", "mlp"), config, "eager")


def placed_children(runner: ExperimentExecutor, seconds: float, runs: list,
                    failing: dict[int, str] = {}):
    """Children that take `seconds` each, noting process, cores, threads, attempt and times;
    the first attempt of a process in `failing` fails with that error."""
    import threading
    import time

    lock = threading.Lock()

    def run_child(planned, role, slot=None, process=1, scratch=None, attempt=1, threads=None):
        started = time.monotonic()
        time.sleep(seconds)
        with lock:
            runs.append((process, slot.cpu_set if slot else (), threads, attempt, started,
                         time.monotonic()))
        folder = runner.child_folder(planned, role, process, attempt)
        if process in failing and attempt == 1:
            return ChildOutcome(folder, returncode=1, wall_seconds=seconds, result=ChildResult(
                status=Status.FAILED, error=ChildError(failing[process])))
        return ChildOutcome(folder, returncode=0, result=ok(0.1 * process), wall_seconds=seconds)

    runner.run_child = run_child


def test_a_cuda_experiment_alone_on_the_machine_runs_its_later_processes_at_once(tmp_path):
    runner, experiment = cuda_executor(tmp_path, cores=8)
    runs: list = []
    placed_children(runner, 0.4, runs)
    outcome, outcomes = runner.time_processes(experiment, 3)
    by_process = {run[0]: run for run in runs}
    assert by_process[1][1] == () and by_process[1][2] is None  # the first: every core
    assert by_process[2][1] == (0, 1, 2, 3) and by_process[3][1] == (4, 5, 6, 7)
    assert by_process[2][2] == by_process[3][2] == 8  # the first one's threads
    assert by_process[1][5] <= min(by_process[2][4], by_process[3][4])  # after the first
    assert max(by_process[2][4], by_process[3][4]) < min(by_process[2][5], by_process[3][5])
    processes = outcome.result.summary["processes"]
    assert processes["later_at_once"] == [None, [0, 1, 2, 3], [4, 5, 6, 7]]
    assert processes["medians"] == pytest.approx([0.1, 0.2, 0.3])
    assert [o.folder.name for o in outcomes] == ["time", "time-2", "time-3"]


@pytest.mark.parametrize("cores, experiment, why", [
    (6, {}, "shares of 3 CPUs, under the least a share keeps"),
    (8, {"process_caches": "fresh"}, "each process compiles in full"),
    (8, {"processes": 2}, "one later process"),
])
def test_later_processes_run_in_turn_where_at_once_would_not_pay(tmp_path, cores, experiment, why):
    count = experiment.pop("processes", 3)
    runner, planned_cuda = cuda_executor(tmp_path, cores, **experiment)
    runs: list = []
    placed_children(runner, 0.1, runs)
    outcome, _ = runner.time_processes(planned_cuda, count)
    assert [(process, cores_of) for process, cores_of, *_ in runs] == \
        [(process, ()) for process in range(1, count + 1)], why
    assert "later_at_once" not in outcome.result.summary["processes"], why


def test_a_cpu_experiment_never_runs_its_processes_at_once(tmp_path):
    runner = executor(tmp_path)
    runner.options = dataclasses.replace(runner.options, cpu_set=tuple(range(16)))
    assert runner.later_shares(planned(), 3, None) == []


def test_a_later_process_out_of_gpu_memory_beside_the_other_runs_again_alone(tmp_path):
    runner, experiment = cuda_executor(tmp_path, cores=8)
    runs: list = []
    placed_children(runner, 0.1, runs, failing={3: "torch.OutOfMemoryError: CUDA out of memory"})
    outcome, outcomes = runner.time_processes(experiment, 3)
    assert sorted((process, cores_of, attempt) for process, cores_of, _, attempt, *_ in runs) == [
        (1, (), 1), (2, (0, 1, 2, 3), 1), (3, (), 2), (3, (4, 5, 6, 7), 1)]
    assert outcome.result.summary["processes"]["count"] == 3
    assert outcome.result.summary["processes"]["later_at_once"] == [None, [0, 1, 2, 3], None]
    assert any("ran again alone" in note for note in outcomes[2].notes)
