"""core.host.host_state: a line's per-run host readings summed up, and processes joined."""

from core.host.host_state import COLUMNS, PROCESS_COLUMN, join_processes, summarize


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
