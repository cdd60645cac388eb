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
"""

from __future__ import annotations

import statistics
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
