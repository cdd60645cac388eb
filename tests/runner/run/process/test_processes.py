"""Several timing processes made one result (runner/run/process/processes.py), with fake results."""

from __future__ import annotations

import statistics

import pytest

from core.contract import ChildError, ChildResult
from core.schema import Status
from runner.run.process.processes import combine, process_median


def timing_result(times: list[float], cold: float = 1.0, eager: list[float] | None = None,
                  reasons: tuple[str, ...] = (), **summary) -> ChildResult:
    """A timing child's result: the cold-start entry, then the timed runs."""
    metrics = {"per_iter_time": [cold, *times], "total_time": [cold, *times]}
    whole = {"cold_start_entries": 1, "cold_start_time": cold, "compile_time_s": cold - min(times),
             "unreliable": bool(reasons), "unreliable_reasons": list(reasons),
             "timing_variation": 0.01, **summary}
    if eager is not None:
        metrics["eager_per_iter_time"] = [cold / 2, *eager]
        speedups = [e / c for e, c in zip(eager, times)]
        whole["paired_speedup"] = {"method": "paired", "speedup": statistics.median(eager)
                                   / statistics.median(times), "pairs": len(times),
                                   "median_of_pairs": statistics.median(speedups),
                                   "p_value": 0.5}
    return ChildResult(status=Status.OK, metrics=metrics, summary=whole)


def test_the_figure_is_the_median_over_processes_and_the_line_keeps_each_median():
    results = [timing_result([1.0, 1.2, 1.1], cold=9.0), timing_result([2.0, 2.2, 2.1], cold=3.0),
               timing_result([1.5, 1.4, 1.6], cold=2.5)]
    combined = combine(results, 3)
    processes = combined.summary["processes"]
    assert processes["medians"] == [1.1, 2.1, 1.5]
    assert processes["median"] == 1.5
    assert processes["count"] == 3 and processes["asked"] == 3
    assert processes["spread"] == pytest.approx((2.1 - 1.1) / 1.5)
    # Compilation stays the first process's; the others' cold starts are kept apart.
    assert combined.summary["compile_time_s"] == pytest.approx(8.0)
    assert combined.summary["cold_start_time"] == 9.0
    assert processes["cold_start_times"] == [9.0, 3.0, 2.5]
    # One list per metric: the first cold start, then every process's timed runs.
    assert combined.metrics["per_iter_time"] == [9.0, 1.0, 1.2, 1.1, 2.0, 2.2, 2.1, 1.5, 1.4, 1.6]
    assert combined.metrics["process"] == [1, 1, 1, 1, 2, 2, 2, 3, 3, 3]


def test_one_process_is_returned_as_it_is():
    result = timing_result([1.0, 2.0, 3.0])
    assert combine([result], 1) is result
    assert process_median(result) == 2.0


def test_a_failed_later_process_is_named_and_the_others_make_the_figure():
    failed = ChildResult(status=Status.FAILED, error=ChildError("RuntimeError: boom"))
    combined = combine([timing_result([1.0]), failed, timing_result([3.0])], 3)
    assert combined.status is Status.OK
    assert combined.summary["processes"]["medians"] == [1.0, 3.0]
    assert combined.summary["processes"]["failed"] == [
        {"process": 2, "status": "failed", "error": "RuntimeError: boom"}]
    assert any("timing process 2 of 3" in note and "boom" in note for note in combined.notes)
    assert combined.metrics["process"] == [1, 1, 3]


def test_a_failed_first_process_is_the_experiments_result():
    failed = ChildResult(status=Status.FAILED, error=ChildError("RuntimeError: boom"))
    assert combine([failed], 3) is failed


def test_the_paired_speedup_is_the_median_of_the_processes_speedups():
    results = [timing_result([1.0, 1.1], eager=[2.0, 2.2]), timing_result([1.0, 1.1], eager=[3.0, 3.3]),
               timing_result([1.0, 1.1], eager=[2.5, 2.75])]
    paired = combine(results, 3).summary["paired_speedup"]
    assert paired["process_speedups"] == [2.0, 3.0, 2.5]
    assert paired["speedup"] == 2.5
    assert paired["pairs"] == 6
    assert combine(results, 3).summary["processes"]["eager_medians"] == pytest.approx([2.1, 3.15, 2.625])


def test_any_flagged_process_flags_the_line_with_its_number():
    results = [timing_result([1.0]), timing_result([1.0], reasons=("contention: 40%",))]
    combined = combine(results, 2)
    assert combined.summary["unreliable"] is True
    assert combined.summary["unreliable_reasons"] == ["process 2: contention: 40%"]
    quiet = combine([timing_result([1.0]), timing_result([1.0])], 2)
    assert quiet.summary["unreliable"] is False


def test_host_bound_iterations_are_counted_over_processes():
    bound = {"host_bound_line_bound": 0.5}
    results = [timing_result([1.0], host_bound_iterations=8, host_bound_judged=10, **bound),
               timing_result([1.0], host_bound_iterations=1, host_bound_judged=10, **bound)]
    combined = combine(results, 2).summary
    assert combined["host_bound_fraction"] == pytest.approx(0.45)
    assert combined["host_bound"] is False
    results[1].summary["host_bound_iterations"] = 5
    assert combine(results, 2).summary["host_bound"] is True


def test_the_card_held_down_longest_stands_for_the_line_and_every_card_is_kept():
    def card(power: float, thermal: float) -> dict:
        return {"clocks_held_down": {"power": power, "thermal": thermal}, "power_w": 500.0}

    cards = [card(0.1, 0.0), card(0.2, 0.3), card(0.0, 0.0)]
    combined = combine([timing_result([1.0], gpu=window) for window in cards], 3).summary
    assert combined["gpu"] == cards[1]
    assert combined["gpu_processes"] == cards
    assert "gpu" not in combine([timing_result([1.0]), timing_result([1.0])], 2).summary


def test_the_host_state_is_summed_over_every_processs_runs_and_kept_per_process():
    from core.host.host_state import summarize

    fast = {"cpu_start": [2, 2], "cpu_end": [2, 2], "freq_mhz": [3000.0, 3000.0]}
    slow = {"cpu_start": [5, 6], "cpu_end": [6, 6], "freq_mhz": [1500.0, 1600.0]}
    results = [timing_result([1.0, 1.0], host_windows=fast, host_state=summarize(fast)),
               timing_result([2.0, 2.0], host_windows=slow, host_state=summarize(slow)),
               timing_result([1.1, 1.0])]  # a process that read no state
    state = combine(results, 3).summary["host_state"]
    windows = combine(results, 3).summary["host_windows"]
    assert windows["process"] == [1, 1, 2, 2] and windows["cpu_start"] == [2, 2, 5, 6]
    assert state["runs"] == 4 and state["moved_share"] == 0.25 and state["cpus"] == [2, 5, 6]
    assert state["freq_mhz"]["low"] == 1500.0
    assert [process and process["freq_mhz"]["median"] for process in state["processes"]] == [
        3000.0, 1550.0, None]
    assert "host_state" not in combine([timing_result([1.0]), timing_result([2.0])],
                                       2).summary


def test_the_device_busy_time_is_the_median_of_the_processes_with_its_spread():
    def busy(ms, eager):
        return {"ms": ms, "iterations_ms": [ms], "kernels": 40, "reason": None,
                "eager": {"ms": eager, "kernels": 90}}

    results = [timing_result([1.0], device_busy=busy(2.0, 5.0), device_busy_ms=2.0),
               timing_result([3.0], device_busy=busy(2.2, 5.5), device_busy_ms=2.2),
               timing_result([1.5], device_busy=busy(2.1, 5.2), device_busy_ms=2.1)]
    summary = combine(results, 3).summary
    assert summary["device_busy_ms"] == 2.1 and summary["eager_device_busy_ms"] == 5.2
    assert summary["device_busy"]["processes_ms"] == [2.0, 2.2, 2.1]
    assert summary["device_busy"]["spread"] == pytest.approx(0.2 / 2.1)
    assert summary["device_busy"]["eager"]["processes_ms"] == [5.0, 5.5, 5.2]
    assert "processes_launches" not in summary["device_busy"]
    # Each process's launch digest: processes that share the first one's caches agree;
    # one compiled afresh (--process-caches=fresh) may have tuned otherwise.
    tuned = [timing_result([1.0], device_busy={**busy(2.0, 5.0), "digests": {
        "kernels": "k", "launches": launches, "count": 40}}, device_busy_ms=2.0)
        for launches in ("a", "a", "b")]
    combined = combine(tuned, 3).summary["device_busy"]
    assert combined["processes_launches"] == ["a", "a", "b"]
    assert combined["digests"] == {"kernels": "k", "launches": "a", "count": 40}
    cpu = {"ms": None, "reason": "no device kernels to sum on cpu"}
    none = combine([timing_result([1.0], device_busy=cpu, device_busy_ms=None),
                    timing_result([2.0], device_busy=cpu, device_busy_ms=None)], 2).summary
    assert none["device_busy_ms"] is None and none["device_busy"]["reason"] == cpu["reason"]


def test_the_cpu_time_is_the_median_of_the_processes_and_contention_of_any_counts():
    def cpu(ms, reason=None):
        found = {"ms": ms, "process_ms": ms * 1.02, "timing_thread_share": 0.98}
        return {"cpu_time": {**found, "reason": reason} if reason else found,
                "cpu_time_ms": None if reason else ms}

    summary = combine([timing_result([1.0], contended=False, **cpu(0.50)),
                       timing_result([2.0], contended=True, **cpu(0.52)),
                       timing_result([1.1], contended=False, **cpu(0.51))], 3).summary
    assert summary["cpu_time_ms"] == 0.51 and summary["contended"] is True
    assert summary["cpu_time"]["processes_ms"] == [0.50, 0.52, 0.51]
    assert summary["cpu_time"]["spread"] == pytest.approx(0.02 / 0.51)
    # A process without the figure leaves the experiment without it, with that one's reason.
    summary = combine([timing_result([1.0], contended=False, **cpu(0.50)),
                       timing_result([1.0], contended=False, **cpu(0.6, "2 compute threads"))],
                      2).summary
    assert summary["cpu_time_ms"] is None and summary["cpu_time"]["reason"] == "2 compute threads"
    assert summary["contended"] is False
    assert "cpu_time" not in combine([timing_result([1.0]), timing_result([2.0])], 2).summary


def test_the_cpu_time_in_host_pulses_is_the_median_of_the_processes_that_all_have_it():
    def cpu(ms, pulse_ms=None):
        found = {"ms": ms, "process_ms": ms, "timing_thread_share": 1.0}
        if pulse_ms is not None:
            found.update(pulse_ms=pulse_ms, in_pulses=ms / pulse_ms)
        return {"cpu_time": found, "cpu_time_ms": ms}

    # The second process ran on a core twice as slow: its CPU time doubled, its pulse too.
    summary = combine([timing_result([1.0], **cpu(0.5, 0.25)),
                       timing_result([2.0], **cpu(1.0, 0.5)),
                       timing_result([1.0], **cpu(0.5, 0.25))], 3).summary
    assert summary["cpu_time"]["pulse_ms"] == 0.25 and summary["cpu_time"]["in_pulses"] == 2.0
    # One process without the pulses (the first's figure is not the line's): none.
    summary = combine([timing_result([1.0], **cpu(0.5, 0.25)), timing_result([1.0], **cpu(0.5))],
                      2).summary
    assert "pulse_ms" not in summary["cpu_time"] and "in_pulses" not in summary["cpu_time"]
