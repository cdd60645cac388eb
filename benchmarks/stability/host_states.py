"""Each timing process's figure beside its host pulse and the host's state it met: what
moves with the host's two states (docs/timing.md, "The host's state per timed run").

    python -m benchmarks.stability.host_states RESULTS [RESULTS ...] [--by-pulse [--fast-bound MS]]

A RESULTS is a results file, or a run of a table kept in benchmarks/tables (TABLE/PART:
benchmarks/table_inputs.py).

One row per timing process of each line that ran: the process's median compiled (and eager)
time per iteration, its host pulse (the median of the pulses read during its timed runs),
the device's busy time per iteration (CUDA), then what `summary.host_state` summed up over
its timed runs: the CPUs its timing thread ran on, the share of runs in which it moved to
another CPU, was preempted or waited for a CPU, its time waiting and the steal, the CPU
frequency's and the card's SM clock's medians, and the card's performance states.

`--by-pulse` prints one row per line instead, from each timed run's time and the host pulse
read right after it: how closely they go together (Pearson's r over the runs), the line's
figure over all runs (the median of its processes' medians), and the same figure over the
runs whose pulse was at most `--fast-bound` ms (the host's fast state), with their share, and
over the others. Without `--fast-bound` the bound is 1.25 times the 10th percentile of every
run's pulse in the files given (on the lent H200 hosts, 0.6 ms fast and 1.0 to 1.3 ms slow).
Last, the figure with every run scaled to the low pulse (the bound over 1.25), on host-bound
lines (core/host/host_state.py: `at_low_pulse`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any, Optional

from benchmarks.table_inputs import Runs
from core.files.results_file import read_results
from core.host.host_state import FAST_BOUND_OVER_LOW, low_pulse, pulse_states, timed_runs

HEADER = ("model", "test", "process", "ours ind.", "ours eager", "pulse", "busy", "cpus",
          "moved", "preempted", "waited", "waited ms", "steal ms", "MHz", "SM MHz", "pstates")


def _ms(seconds: Any) -> str:
    return f"{seconds * 1e3:.2f}" if isinstance(seconds, (int, float)) else "-"


def _share(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, (int, float)) else "-"


def _number(value: Any, digits: int = 0) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "-"


def _median(value: Any) -> Optional[float]:
    return value.get("median") if isinstance(value, dict) else None


def process_rows(line: dict[str, Any]) -> list[list[str]]:
    """A line's rows: one per timing process (one for a line of a single process)."""
    summary = line.get("summary") or {}
    processes = summary.get("processes") or {}
    state = summary.get("host_state") or {}
    states = state.get("processes") or [state]
    compiled = processes.get("medians") or [None] * len(states)
    eager = processes.get("eager_medians") or [None] * len(states)
    references = summary.get("reference_processes") or [summary.get("reference")] * len(states)
    busy = summary.get("device_busy") or {}
    busy_each = busy.get("processes_ms") or [busy.get("ms")] * len(states)
    if not processes:  # one process: its figure is its timed runs' median
        paired = summary.get("paired_speedup") or {}
        eager_ms = paired.get("eager_median_per_iter_time")
        compiled = [eager_ms / paired["speedup"] if eager_ms and paired.get("speedup") else None]
        eager = [eager_ms]
    rows = []
    for index, process_state in enumerate(states):
        process_state = process_state or {}
        reference = references[index] if index < len(references) else None
        pulse = ((reference or {}).get("during") or {}).get("host_ms")
        rows.append([
            line["model"]["model_name"], line["experiment"]["test"], str(index + 1),
            _ms(compiled[index] if index < len(compiled) else None),
            _ms(eager[index] if index < len(eager) else None),
            _number(pulse, 2), _number(busy_each[index] if index < len(busy_each) else None, 3),
            ",".join(map(str, process_state.get("cpus") or [])) or "-",
            _share(process_state.get("moved_share")), _share(process_state.get("preempted_share")),
            _share(process_state.get("waited_share")), _number(process_state.get("waited_ms"), 1),
            _number(process_state.get("steal_ms"), 0), _number(_median(process_state.get("freq_mhz"))),
            _number(_median(process_state.get("gpu_sm_mhz"))),
            ",".join(map(str, process_state.get("gpu_pstates") or [])) or "-",
        ])
    return rows


PULSE_HEADER = ("model", "test", "runs", "r(time, pulse)", "all runs ms", "fast ms",
                "fast share", "slow ms", "processes fast/slow", "at low pulse ms")


def pulse_row(line: dict[str, Any], fast_bound: float) -> Optional[list[str]]:
    """A line's row of `--by-pulse`: None for a line without a pulse after each timed run."""
    metrics, summary = line.get("metrics") or {}, line.get("summary") or {}
    runs = timed_runs(metrics, summary)
    states = pulse_states(metrics, summary, fast_bound_ms=fast_bound)
    if states is None or len(runs) < 2:
        return None
    everything = pulse_states(metrics, summary, fast_bound_ms=float("inf"))["fast"]
    try:
        correlation = statistics.correlation([run[1] for run in runs], [run[2] for run in runs])
    except statistics.StatisticsError:  # every time or every pulse the same
        correlation = None
    fast, slow = states["fast"], states["slow"]
    return [line["model"]["model_name"], line["experiment"]["test"], str(len(runs)),
            _number(correlation, 2), _ms(everything["median_per_iter_time"]),
            _ms(fast["median_per_iter_time"]), _share(fast["share"]),
            _ms(slow["median_per_iter_time"]), f"{fast['processes']}/{slow['processes']}",
            _ms(states["at_low_pulse"]["median_per_iter_time"])]


def fast_bound_of(lines: list[dict[str, Any]]) -> float:
    """FAST_BOUND_OVER_LOW times the low pulse (the 10th percentile) of every run in `lines`."""
    low = low_pulse([run[2] for line in lines
                     for run in timed_runs(line.get("metrics") or {}, line.get("summary") or {})])
    if low is None:
        raise ValueError("no timed run of these lines has a host pulse")
    return FAST_BOUND_OVER_LOW * low


def _print_table(header: tuple[str, ...], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" for _ in header) + " |")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+",
                        help="results files (JSON lines), or runs of a kept table (TABLE/PART)")
    parser.add_argument("--by-pulse", action="store_true",
                        help="a row per line: its figure over all runs and in each host state")
    parser.add_argument("--fast-bound", type=float, metavar="MS",
                        help="the highest pulse of the fast state (default: from the pulses)")
    options = parser.parse_args(argv)
    runs, found = Runs(), []
    for path in options.results:
        try:
            found += (read_results(path).lines if path.is_file() else runs.open(path).lines())
        except FileNotFoundError:
            parser.error(f"no such results file, nor a run of a kept table: {path}")
    if options.fast_bound is not None and not options.fast_bound > 0:
        parser.error("--fast-bound must be a number of milliseconds above 0, "
                     f"not {options.fast_bound}")
    lines = [line for line in found if line.get("status") == "ok"]
    if not options.by_pulse:
        _print_table(HEADER, [row for line in lines for row in process_rows(line)])
        return 0
    try:
        bound = options.fast_bound if options.fast_bound is not None else fast_bound_of(lines)
    except ValueError as error:
        parser.error(str(error))
    print(f"fast state: a pulse of at most {bound:.3f} ms")
    _print_table(PULSE_HEADER, [row for line in lines if (row := pulse_row(line, bound))])
    return 0


if __name__ == "__main__":
    sys.exit(main())
