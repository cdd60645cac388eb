"""core.host.host_state: a line's per-run host readings summed up, processes joined, and the
line's figure in each of the host's states."""

import pytest

from core.host.host_state import (COLUMNS, PROCESS_COLUMN, join_processes, low_pulse,
                                  pulse_states, summarize, timed_runs)


def columns(**given):
    runs = max(len(values) for values in given.values())
    return {name: given.get(name, [None] * runs) for name in COLUMNS}


def test_shares_totals_and_ranges_of_the_runs():
    state = summarize(columns(
        cpu_start=[3, 3, 5, 7], cpu_end=[3, 4, 5, 7], migrations=[0, 1, 0, 2],
        involuntary_switches=[0, 2, 0, 0], steal_ms=[0.0, 0.0, 10.0, 0.0],
        freq_mhz=[3000.0, 1500.0, 3000.0, 2900.0], numa_node=[0, 0, 1, 1],
        minor_faults=[1, 0, 0, 3], gpu_sm_mhz_start=[1980, 1980, 1755, None],
        gpu_sm_mhz_end=[1980, 1980, 1980, None], gpu_pstate=[0, 0, 0, None],
        read_us=[40.0, 60.0, 50.0, 70.0]))
    assert state["runs"] == 4 and state["cpus"] == [3, 4, 5, 7] and state["numa_nodes"] == [0, 1]
    assert state["moved_share"] == 0.5  # run 2 moved to another CPU, run 4 migrated and back
    assert state["migrations"] == 3 and state["preempted_share"] == 0.25
    assert state["steal_share"] == 0.25 and state["steal_ms"] == 10.0
    assert state["freq_mhz"] == {"median": 2950.0, "low": 1500.0, "high": 3000.0}
    assert state["gpu_sm_mhz"]["low"] == 1755 and state["gpu_pstates"] == [0]
    assert state["minor_faults"] == 4 and state["read_us"] == 55.0


def test_what_was_never_read_is_none_not_zero():
    state = summarize(columns(cpu_start=[1, 1], cpu_end=[1, 1]))
    assert state["moved_share"] == 0.0
    assert state["steal_share"] is None and state["freq_mhz"] is None
    assert state["migrations"] is None and state["gpu_pstates"] == []
    assert summarize({})["runs"] == 0 and summarize({})["moved_share"] is None
    # a column not read at all (no migrations on this kernel) does not hide the others
    assert summarize({"cpu_start": [1, 2], "cpu_end": [2, 2]})["moved_share"] == 0.5


def test_processes_are_joined_with_a_column_naming_each_runs_process():
    first = columns(cpu_start=[1, 2], freq_mhz=[3000.0, 3100.0])
    second = {"cpu_start": [5]}  # a column missing reads None
    joined = join_processes([first, None, second])
    assert joined["cpu_start"] == [1, 2, 5] and joined["freq_mhz"] == [3000.0, 3100.0, None]
    assert joined[PROCESS_COLUMN] == [1, 1, 3]
    assert summarize(joined)["runs"] == 3


def two_processes(pulses=((0.6, 0.6, 0.62, 0.61, 1.1, 1.2), (0.6, 0.61, 0.6, 1.1, 1.15, 1.2))):
    """A line of two processes of six runs; each run's time follows its pulse."""
    times = [[0.004, 0.0041, 0.0042, 0.0040, 0.007, 0.008],
             [0.0043, 0.0044, 0.0045, 0.0070, 0.0072, 0.0074]]
    metrics = {"per_iter_time": [9.0, *times[0], *times[1]], "process": [1] * 7 + [2] * 6}
    summary = {"cold_start_entries": 1,
               "reference_processes": [{"during": {"pulses_ms": list(p)}} for p in pulses]}
    return metrics, summary


def test_each_state_has_the_lines_figure_over_its_runs_and_their_share():
    metrics, summary = two_processes()
    states = pulse_states(metrics, summary)
    # The line's low pulse (0.6 ms: fewer than 10 runs, their least) times 1.25.
    assert states["fast_bound_ms"] == pytest.approx(0.75) and states["low_from"] == "line"
    assert states["runs"] == 12
    # Fast: process 1's four runs (4.05 ms) and process 2's three (4.4 ms), their median.
    assert states["fast"] == {"median_per_iter_time": pytest.approx(0.004225), "runs": 7,
                              "share": 7 / 12, "processes": 2}
    # Slow: process 1 has two slow runs, too few to count; process 2's three make it.
    assert states["slow"] == {"median_per_iter_time": pytest.approx(0.0072), "runs": 5,
                              "share": 5 / 12, "processes": 1}


def test_at_the_low_pulse_every_run_counts_scaled_to_the_hosts_fast_speed():
    # A host-bound model whose time is 6.5 pulses a run, whatever the state: one process
    # mostly fast, the other mostly slow. Their medians are 1.5x apart; scaled, they agree.
    pulses = ((0.6, 0.6, 0.62, 0.6, 1.1), (1.1, 1.0, 1.2, 0.6, 1.1))
    metrics = {"per_iter_time": [9.0, *(6.5e-3 * p for p in pulses[0]),
                                 *(6.5e-3 * p for p in pulses[1])],
               "process": [1] * 6 + [2] * 5}
    summary = {"cold_start_entries": 1, "host_bound": True,
               "reference_processes": [{"during": {"pulses_ms": list(p)}} for p in pulses]}
    states = pulse_states(metrics, summary, host_low_ms=0.5)
    scaled = states["at_low_pulse"]
    assert scaled["pulse_ms"] == pytest.approx(0.5)  # the host's low pulse, not the line's
    assert scaled["median_per_iter_time"] == pytest.approx(3.25e-3)
    assert scaled["processes"] == [pytest.approx(3.25e-3)] * 2 and scaled["spread"] < 1e-9
    # The card's busy time per iteration is a floor: its part does not follow the host.
    summary["device_busy"] = {"processes_ms": [3.5, 3.0]}
    scaled = pulse_states(metrics, summary, host_low_ms=0.5)["at_low_pulse"]
    assert scaled["processes"] == [pytest.approx(3.5e-3), pytest.approx(3.25e-3)]
    # Where the card, not the host, sets the time, scaling by the host's speed would be wrong.
    summary["host_bound"] = False
    assert pulse_states(metrics, summary)["at_low_pulse"]["median_per_iter_time"] is None


def test_a_host_whose_fast_state_is_known_keeps_a_slow_line_slow():
    # Every run of this line was slow: against its own low pulse (1.1 ms) its best runs
    # would count as fast; the host's history knows a fast state of 0.6 ms.
    metrics, summary = two_processes(pulses=((1.1, 1.1, 1.2, 1.2, 1.3, 1.3),) * 2)
    assert pulse_states(metrics, summary)["fast"]["runs"] == 12
    states = pulse_states(metrics, summary, host_low_ms=0.6)
    assert states["low_from"] == "host" and states["fast"]["runs"] == 0
    assert states["fast"]["median_per_iter_time"] is None and states["slow"]["share"] == 1.0
    # A history slower than the line does not widen the bound.
    assert pulse_states(*two_processes(), host_low_ms=0.9)["low_from"] == "line"
    assert pulse_states(*two_processes(), fast_bound_ms=2.0)["fast"]["runs"] == 12


def test_a_line_whose_pulses_do_not_match_its_runs_has_no_states():
    metrics, summary = two_processes()
    summary["reference_processes"][1]["during"]["pulses_ms"].pop()
    assert timed_runs(metrics, summary) == [] and pulse_states(metrics, summary) is None
    assert pulse_states(metrics, {"cold_start_entries": 1}) is None  # no reference at all
    single = {"per_iter_time": [1.0, 0.002, 0.003, 0.004]}
    line = {"cold_start_entries": 1, "reference": {"during": {"pulses_ms": [0.5, 0.5, 0.9]}}}
    assert [run[0] for run in timed_runs(single, line)] == [1, 1, 1]
    assert pulse_states(single, line)["fast"]["runs"] == 2


def test_the_low_pulse_is_the_tenth_percentile_from_ten_pulses_on():
    assert low_pulse([]) is None and low_pulse([0.7, 0.6]) == 0.6
    assert low_pulse([0.6 + i / 100 for i in range(20)]) == pytest.approx(0.611)  # (n+1)/10th
    assert low_pulse([float("nan"), 0.8, True]) == 0.8
