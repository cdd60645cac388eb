"""Trust in timings: contention on the child's cores and run-to-run variation."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from child.trust import (
    CpuSample, CpuWatch, CpuWindow, MainThreadSample, cpu_time_summary, judge, read_main_thread,
    relative_spread,
)


def busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def work(seconds: float) -> None:
    busy(seconds)


def use_cpu(seconds: float) -> None:
    """Spin until this process has had `seconds` of CPU (however loaded the machine is)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def watched_while_busy(watch: CpuWatch, busy_cpu: int):
    """`watch`'s window over half a second while another process spins on `busy_cpu`."""
    hog = multiprocessing.get_context("spawn").Process(target=busy, args=(5.0,))
    hog.start()
    try:
        os.sched_setaffinity(hog.pid, [busy_cpu])
        time.sleep(0.3)
        watch.start()
        time.sleep(0.5)
        return watch.stop()
    finally:
        hog.terminate()
        hog.join()


def test_variation_is_judged_only_with_enough_runs():
    assert relative_spread([1.0, 2.0]) is None
    assert relative_spread([1.0, 1.0, 1.0]) == 0.0
    steady = judge([1.0, 1.01, 0.99, 1.0], None)
    assert not steady.unreliable and steady.reasons == []
    noisy = judge([1.0, 2.0, 1.0, 3.0], None)
    assert noisy.unreliable and "vary by" in noisy.reasons[0]
    assert not noisy.contended  # varying runs alone are not contention


def test_the_timing_threads_cpu_time_stands_only_where_that_thread_did_the_work():
    ms = cpu_time_summary([0.002, 0.003, 0.004], [0.0021, 0.0031, 0.0041], "cpu", threads=1)
    assert ms["cpu_time_ms"] == pytest.approx(3.0)
    assert ms["cpu_time"]["process_ms"] == pytest.approx(3.1)
    assert ms["cpu_time"]["timing_thread_share"] == pytest.approx(0.009 / 0.0093)
    # XLA's pool did the work: the calling thread's share is small.
    pool = cpu_time_summary([0.001] * 3, [0.004] * 3, "cpu", threads=1)
    assert pool["cpu_time_ms"] is None and "took 25% of the process's CPU time" in pool[
        "cpu_time"]["reason"]
    threads = cpu_time_summary([0.001] * 3, [0.001] * 3, "cpu", threads=2)
    assert threads["cpu_time_ms"] is None and threads["cpu_time"]["reason"].startswith("2 compute")
    cuda = cpu_time_summary([0.001] * 3, [0.001] * 3, "cuda", threads=1)
    assert cuda["cpu_time_ms"] is None and cuda["cpu_time"]["ms"] == pytest.approx(1.0)
    assert cpu_time_summary([], [], "cpu", threads=1) == {}


def test_the_cpu_time_is_read_in_host_pulses_run_by_run():
    """Each run's CPU time per iteration over the pulse read right after it: a core that ran
    twice as slow through the third run moved its CPU time and its pulse alike."""
    thread = [0.002, 0.002, 0.004, 0.002]
    found = cpu_time_summary(thread, thread, "cpu", threads=1, pulse_cpu=[0.5, 0.5, 1.0, 0.5])
    assert found["cpu_time"]["pulse_ms"] == pytest.approx(0.5)
    assert found["cpu_time"]["in_pulses"] == pytest.approx(4.0)
    # The median of the runs' ratios, not the ratio of the medians (3 ms / 0.5 ms = 6).
    mixed = cpu_time_summary([0.002, 0.004, 0.004], [0.002, 0.004, 0.004], "cpu", threads=1,
                             pulse_cpu=[0.5, 1.0, 1.0])
    assert mixed["cpu_time"]["in_pulses"] == pytest.approx(4.0)
    # Without a pulse after every run (--no-reference-workload: none), no figure.
    for pulses in ([], [0.5, 0.5]):
        assert "in_pulses" not in cpu_time_summary(thread, thread, "cpu", threads=1,
                                                   pulse_cpu=pulses)["cpu_time"]


@pytest.mark.e2e
def test_a_core_that_another_process_keeps_busy_is_flagged():
    core = sorted(os.sched_getaffinity(0))[0]
    busy_window = watched_while_busy(CpuWatch(threads=1, cores=[core]), busy_cpu=core)
    assert busy_window.others_fraction > 0.5, busy_window.to_dict()
    verdict = judge([1.0, 1.0, 1.0], busy_window)
    assert verdict.unreliable and verdict.reasons[0].startswith("contention: other processes used")
    assert verdict.contended


def test_a_short_window_is_judged_by_an_idle_probe():
    watch = CpuWatch(threads=1)
    watch.start()
    window = watch.stop()
    assert window.probe is not None
    assert window.to_dict()["others_measured"] == "idle probe after the timed runs"


@pytest.mark.parametrize("cores", [[0]])
def test_the_window_records_what_a_reader_needs(cores):
    watch = CpuWatch(threads=3, cores=cores)
    watch.start()
    use_cpu(0.3)
    record = watch.stop().to_dict()
    assert record["cores"] == cores and record["threads"] == 3
    assert record["wall_s"] >= 0.3 and record["process_cpu_s"] > 0.15
    assert len(record["load_average_before"]) == 3 and record["others_measured"] == "timed runs"


@pytest.mark.e2e
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a second core")
def test_a_busy_smt_sibling_outside_the_childs_cores_is_flagged():
    """Told that its core's sibling is the next CPU, the watch sees a process that keeps
    that CPU busy, which the count of its own cores misses."""
    core, sibling = sorted(os.sched_getaffinity(0))[:2]

    def pairs(cpu: int) -> tuple[int, ...]:
        return (core, sibling) if cpu in (core, sibling) else (cpu,)

    window = watched_while_busy(CpuWatch(threads=1, cores=[core], siblings=pairs),
                                busy_cpu=sibling)
    record = window.to_dict()
    assert record["smt_siblings"] == [sibling]
    assert window.siblings_busy_fraction > 0.5, record
    verdict = judge([1.0, 1.0, 1.0], window)
    assert verdict.unreliable and verdict.contended
    assert any(reason.startswith("contention through shared physical cores")
               for reason in verdict.reasons)


def test_a_core_without_siblings_reports_none():
    watch = CpuWatch(threads=1, cores=[0], siblings=lambda cpu: (cpu,))
    watch.start()
    record = watch.stop().to_dict()
    assert record["smt_siblings"] == [] and record["siblings_busy_fraction"] is None


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a second core")
@pytest.mark.skipif(read_main_thread() is None, reason="the kernel does not tell")
def test_moving_the_main_thread_to_another_core_counts_as_a_migration():
    allowed = os.sched_getaffinity(0)
    first, second = sorted(allowed)[:2]
    try:
        os.sched_setaffinity(0, [first])
        use_cpu(0.02)
        before = read_main_thread()
        os.sched_setaffinity(0, [second])
        use_cpu(0.02)
        after = read_main_thread()
    finally:
        os.sched_setaffinity(0, allowed)
    assert before.cpu == first and after.cpu == second
    assert after.migrations > before.migrations
    assert after.preemptions >= before.preemptions


def test_an_unreadable_or_foreign_sched_file_gives_none(tmp_path):
    assert read_main_thread(str(tmp_path / "missing")) is None
    odd = tmp_path / "sched"
    odd.write_text("python (1, #threads: 1)\nnr_switches : 7\n")
    assert read_main_thread(str(odd)) is None


def sample(wall: float, steal: float, main: MainThreadSample | None) -> CpuSample:
    return CpuSample(wall, process_cpu=0.0, cores_busy=0.0, load_average=(0.0, 0.0, 0.0),
                     cores_steal=steal, main_thread=main)


def test_the_window_tells_stolen_time_and_how_the_main_thread_was_scheduled():
    window = CpuWindow((0, 1), 1, sample(10.0, 3.0, MainThreadSample(0, 5, 2)),
                       sample(12.0, 3.8, MainThreadSample(1, 9, 3)))
    record = window.to_dict()
    assert record["steal_fraction"] == pytest.approx(0.8 / (2.0 * 2))
    assert record["main_thread"] == {"cpu_at_start": 0, "cpu_at_end": 1,
                                     "migrations": 4, "preemptions": 1}
    unknown = CpuWindow((0,), 1, sample(0.0, 0.0, None), sample(1.0, 0.0, None))
    assert unknown.to_dict()["main_thread"] is None and unknown.steal_fraction == 0.0
