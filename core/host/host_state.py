"""The host's state around each timed run, summed up (pure: the child sums up its own runs,
the parent a line's processes with the same rule).

Around each timed run the child reads what the timing thread met (child/host_state.py): the
CPU it ran on at the run's start and end, its moves between CPUs, its context switches, its
time waiting (runnable) for a CPU and its page faults, the steal time and the SMT sibling's busy time of its CPU, that CPU's frequency
and NUMA node, and on CUDA the card's SM clock and performance state. The readings are kept
one column per figure (`summary.host_windows`, one entry per timed run), and summed up in
`summary.host_state`: shares of the runs in which something happened, totals, and the
spread of the frequencies and clocks, so that what moves with the host pulse can be read off
a line (docs/timing.md, "The host's state per timed run").

**The line's figure in each of the host's two states** (`pulse_states`; the parent computes
it for every line whose runs have pulses).

After each timed run the child reads the host pulse (child/reference.py: a fixed Python loop
on the timing thread, about 0.6 ms on a lent H200 host's fast state and 1.0 to 1.3 ms on its
slow one). A run whose pulse is at most `fast_bound_ms` counts in the fast state, the others
in the slow one. Each state's figure is made as the line's is: the median over processes of
each process's median, over the processes with at least `MIN_STATE_RUNS` runs in that state.
The line's headline figure stays the median over all runs (as PyTorch's harness times them,
in whatever state the host was); `summary.pulse_states` keeps both states' figures beside it,
with their shares of the runs.

The bound is `FAST_BOUND_OVER_LOW` times the host's low pulse: the 10th percentile of this
host's recent per-process pulses (runner/run/record/slow_periods.py keeps them) or of the
line's own runs' pulses, whichever is lower. With the line's alone, a line timed wholly in a
slow period would call its best slow runs fast; the host's history knows its fast state.

`pulse_states.at_low_pulse` is the line's figure with every run scaled to the low pulse
(`at_low_pulse`): all runs count, each as fast as the host's fast state would have made it.
Only where the host sets the time: a line not host-bound (summary.host_bound false) has none.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Mapping, Optional, Sequence

#: The columns of `summary.host_windows`, one entry per timed run (None where unread).
COLUMNS = (
    "cpu_start", "cpu_end", "migrations", "voluntary_switches", "involuntary_switches",
    "waited_ms", "minor_faults", "major_faults", "steal_ms", "sibling_busy_ms", "freq_mhz", "numa_node",
    "gpu_sm_mhz_start", "gpu_sm_mhz_end", "gpu_pstate", "read_us",
)
#: The column naming each run's timing process, where a line has several.
PROCESS_COLUMN = "process"


def empty_columns() -> dict[str, list[Any]]:
    """Columns without any run."""
    return {name: [] for name in COLUMNS}


def _numbers(values: Sequence[Any]) -> list[float]:
    return [value for value in values
            if isinstance(value, (int, float)) and not isinstance(value, bool)]


def _share(values: Sequence[Any], runs: int) -> Optional[float]:
    """The share of the runs whose value is above zero; None where none was read."""
    known = _numbers(values)
    return sum(1 for value in known if value > 0) / runs if known and runs else None


def _total(values: Sequence[Any]) -> Optional[float]:
    known = _numbers(values)
    return sum(known) if known else None


def _range(values: Sequence[Any]) -> Optional[dict[str, float]]:
    known = _numbers(values)
    if not known:
        return None
    return {"median": statistics.median(known), "low": min(known), "high": max(known)}


def _distinct(*columns: Sequence[Any]) -> list[Any]:
    return sorted({value for column in columns for value in column if value is not None})


def summarize(columns: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """`summary.host_state` from `summary.host_windows`: how many runs; the CPUs and NUMA
    nodes the timing thread ran on; the share of runs in which it moved (another CPU at the
    end, or a migration), was preempted, waited for a CPU, or lost time to steal or to a busy
    SMT sibling;
    totals of its switches, faults and steal; the CPU frequency's and the card's SM clock's
    median and range; the card's performance states; the median cost of one reading."""
    def column(name: str) -> list[Any]:
        values = columns.get(name)
        return list(values) if isinstance(values, (list, tuple)) else []

    runs = max((len(column(name)) for name in COLUMNS), default=0)

    def padded(name: str) -> list[Any]:
        values = column(name)
        return values + [None] * (runs - len(values))

    starts, ends = padded("cpu_start"), padded("cpu_end")
    moved = [1 if (start is not None and end is not None and start != end)
             or (isinstance(migrations, int) and migrations > 0) else 0
             for start, end, migrations in zip(starts, ends, padded("migrations"))]
    return {
        "runs": runs,
        "cpus": _distinct(starts, ends),
        "numa_nodes": _distinct(column("numa_node")),
        "moved_share": _share(moved, runs) if any(s is not None for s in starts) else None,
        "migrations": _total(column("migrations")),
        "preempted_share": _share(column("involuntary_switches"), runs),
        "involuntary_switches": _total(column("involuntary_switches")),
        "voluntary_switches": _total(column("voluntary_switches")),
        "waited_share": _share(column("waited_ms"), runs),
        "waited_ms": _total(column("waited_ms")),
        "minor_faults": _total(column("minor_faults")),
        "major_faults": _total(column("major_faults")),
        "steal_share": _share(column("steal_ms"), runs),
        "steal_ms": _total(column("steal_ms")),
        "sibling_busy_share": _share(column("sibling_busy_ms"), runs),
        "freq_mhz": _range(column("freq_mhz")),
        "gpu_sm_mhz": _range(column("gpu_sm_mhz_start") + column("gpu_sm_mhz_end")),
        "gpu_pstates": _distinct(column("gpu_pstate")),
        "read_us": (_range(column("read_us")) or {}).get("median"),
    }


def join_processes(per_process: Sequence[Optional[Mapping[str, Sequence[Any]]]],
                   ) -> dict[str, list[Any]]:
    """The processes' columns one after the other, with a `process` column (1-based) naming
    each run's process; a process without columns adds no run."""
    joined = empty_columns()
    joined[PROCESS_COLUMN] = []
    for number, columns in enumerate(per_process, start=1):
        if not isinstance(columns, Mapping):
            continue
        runs = max((len(columns.get(name) or []) for name in COLUMNS), default=0)
        for name in COLUMNS:
            values = list(columns.get(name) or [])
            joined[name].extend(values + [None] * (runs - len(values)))
        joined[PROCESS_COLUMN].extend([number] * runs)
    return joined


# ---- the line's figure in each of the host's states -----------------------------------------
#: The host pulse's additions: about a millisecond on a current server core.
PULSE_LOOPS = 20000


def host_pulse(loops: int = PULSE_LOOPS) -> float:
    """Milliseconds this thread takes for `loops` fixed Python additions: the host's
    single-thread speed at this moment, whatever the device (the child reads it after each
    timed run: child/reference.py; the runner before measuring a slow line again)."""
    start = time.perf_counter()
    total = 0
    for step in range(loops):
        total += step
    return (time.perf_counter() - start) * 1e3


#: The fast state's bound over the host's low pulse.
FAST_BOUND_OVER_LOW = 1.25
#: A process's runs in one state count toward that state's figure from this many on.
MIN_STATE_RUNS = 3


def low_pulse(pulses: Sequence[float]) -> Optional[float]:
    """The 10th percentile of `pulses` (their least, with fewer than 10); None without any."""
    values = sorted(value for value in pulses if _a_time(value))
    if not values:
        return None
    return values[0] if len(values) < 10 else statistics.quantiles(values, n=10)[0]


def _a_time(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e12


def _pulses_of(summary: Mapping[str, Any]) -> Optional[list[list[Any]]]:
    references = summary.get("reference_processes")
    if not isinstance(references, list):
        references = [summary.get("reference")]
    found = []
    for reference in references:
        during = reference.get("during") if isinstance(reference, dict) else None
        pulses = during.get("pulses_ms") if isinstance(during, dict) else None
        if not isinstance(pulses, list):
            return None
        found.append(pulses)
    return found


def timed_runs(metrics: Mapping[str, Any],
               summary: Mapping[str, Any]) -> list[tuple[int, float, float]]:
    """(process, seconds per iteration, pulse ms) of each timed run, where every process's
    runs have one pulse each; none otherwise (a line without pulses, or one whose counts do
    not match)."""
    times = metrics.get("per_iter_time")
    lead = summary.get("cold_start_entries", 0)
    pulses = _pulses_of(summary)
    if not isinstance(times, list) or not isinstance(lead, int) or pulses is None:
        return []
    times = times[lead:]
    owners = metrics.get("process")
    owners = owners[lead:] if isinstance(owners, list) else [1] * len(times)
    if len(owners) != len(times):
        return []
    runs = []
    for index, each in enumerate(pulses, 1):
        mine = [time for owner, time in zip(owners, times) if owner == index]
        if len(mine) != len(each):
            return []
        runs += [(index, time, pulse) for time, pulse in zip(mine, each)
                 if _a_time(time) and _a_time(pulse)]
    return runs


def _state_figure(runs: Sequence[tuple[int, float, float]]) -> tuple[Optional[float], int]:
    medians = []
    for process in sorted({run[0] for run in runs}):
        times = [time for owner, time, _ in runs if owner == process]
        if len(times) >= MIN_STATE_RUNS:
            medians.append(statistics.median(times))
    return (statistics.median(medians) if medians else None), len(medians)


def pulse_states(metrics: Mapping[str, Any], summary: Mapping[str, Any],
                 host_low_ms: Optional[float] = None,
                 fast_bound_ms: Optional[float] = None) -> Optional[dict[str, Any]]:
    """`summary.pulse_states` of a line (see the module's doc), or with `fast_bound_ms`
    against that bound; None for a line without a pulse after each timed run."""
    runs = timed_runs(metrics, summary)
    if not runs:
        return None
    if fast_bound_ms is not None:
        bound, source = fast_bound_ms, "given"
    else:
        line_low = low_pulse([run[2] for run in runs])
        lows = [low for low in (host_low_ms, line_low) if low is not None and _a_time(low)]
        low = min(lows)
        bound, source = FAST_BOUND_OVER_LOW * low, ("host" if low == host_low_ms else "line")
    states: dict[str, Any] = {"fast_bound_ms": bound, "low_from": source, "runs": len(runs)}
    for name, chosen in (("fast", [r for r in runs if r[2] <= bound]),
                         ("slow", [r for r in runs if r[2] > bound])):
        figure, processes = _state_figure(chosen)
        states[name] = {"median_per_iter_time": figure, "runs": len(chosen),
                        "share": len(chosen) / len(runs), "processes": processes}
    states["at_low_pulse"] = (
        at_low_pulse(runs, bound / FAST_BOUND_OVER_LOW, _busy_seconds(summary))
        if summary.get("host_bound") is not False else
        {"median_per_iter_time": None, "reason": "not host-bound: the card sets the time"})
    return states


def _busy_seconds(summary: Mapping[str, Any]) -> list[Optional[float]]:
    """Each process's device busy time per iteration in seconds (summary.device_busy), by
    process number from 1; empty where the line has none."""
    busy = summary.get("device_busy")
    values = busy.get("processes_ms") if isinstance(busy, dict) else None
    if not isinstance(values, list):
        values = [summary.get("device_busy_ms")]
    return [value / 1e3 if _a_time(value) else None for value in values]


def at_low_pulse(runs: Sequence[tuple[int, float, float]], low_ms: float,
                 busy: Sequence[Optional[float]] = ()) -> dict[str, Any]:
    """The line's figure as if the host had run at its low pulse throughout: each run's time
    scaled by the low pulse over the pulse read after it, never below its process's device
    busy time per iteration (the card's part does not follow the host), then the median per
    process and over processes, as the line's figure is made. Where the host's launching
    sets an iteration, its time follows the host's speed as the pulse does."""
    medians = []
    for process in sorted({run[0] for run in runs}):
        floor = busy[process - 1] if process - 1 < len(busy) else None
        scaled = [max(time * low_ms / pulse, floor or 0.0)
                  for owner, time, pulse in runs if owner == process]
        medians.append(statistics.median(scaled))
    figure = statistics.median(medians) if medians else None
    return {"median_per_iter_time": figure, "pulse_ms": low_ms, "processes": medians,
            "spread": (max(medians) - min(medians)) / figure if figure else None}
