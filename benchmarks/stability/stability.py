"""Do two sweeps of the same models on the same machine, minutes apart, agree?

Runs one sweep twice (the same command, fresh results each time) with `--gap` seconds
between them, for each `--processes` value asked (the sweeps of the values alternate, so
the machine's drift reaches each alike), and prints per experiment both figures (the median
over processes, else over the timed runs), their difference, and whether either line was
flagged (unreliable: contention, variation, a slow period; host-bound). The last lines say
how many experiments agree within `--within` (3% by default), per --processes value.

    python -m benchmarks.stability.stability --accelerator=cpu -k '^mlp$' --dynamo=None \\
        --dynamo=inductor --processes 1 --processes 3 --gap 120 [-- more runner flags]

Everything after `--` goes to the runner as it is (suite, models, precision, batch size...).

`--compare FIRST SECOND` runs nothing: it compares two results files of the same sweep made
at different times (on a GPU host, say, where each call brings its results file back), and
for lines of several processes also their first processes alone: the first process is the
child `--processes=1` runs (the same child, first, with fresh compile caches), so the second
table is what the same two sweeps at `--processes=1` measured.

    python -m benchmarks.stability.stability --compare first/results.jsonl second/results.jsonl

Where the lines paired eager with the stack in their processes, a third table compares those
eager figures: a difference the compiled figure shares is the host's or the machine's, one in
the compiled figure alone is the compiled code's or the card's clock. Where the lines hold
the host pulse read during their timed runs (child/reference.py), a last table
compares it: the host's single-thread speed while each experiment was timed.

`--load N` makes the second sweep's period slow on purpose: N busy processes (one Python
loop each, on this process's cores) run during it, and are ended after it. The first
sweep's lines should then not be flagged, and the second one's should (slow period,
contention). Lines with a CPU time per iteration (`--threads=1` on the CPU) get a table of
it too: how far the wait for a core stays out of it (docs/timing.md); and, with the
reference workload's host pulses, one of it in pulses: how far the core's speed does.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

from tabulate import tabulate

from benchmarks.table_inputs import exists, open_run
from benchmarks.timed_sweep import timed_sweep
from core.figures import compiled_code_difference, kernel_digests_of
from core.files.results_file import read_results
from core.figures import median_time, timed_values
from core.schema import stack_label_of
from api import processes_of, readings_of


def first_process_figure(line: dict[str, Any]) -> Optional[float]:
    """The median of the line's first process, where it has several; else None."""
    processes = (line.get("summary") or {}).get("processes")
    medians = processes.get("medians") if isinstance(processes, dict) else None
    if isinstance(medians, list) and len(medians) > 1 and isinstance(medians[0], (int, float)):
        return medians[0]
    return None


def paired_eager_figure(line: dict[str, Any]) -> Optional[float]:
    """The median time of the eager runs paired with the line's stack in its own processes
    (the median over processes where there are several), or None where it was not paired."""
    summary = line.get("summary") or {}
    processes = summary.get("processes")
    medians = processes.get("eager_medians") if isinstance(processes, dict) else None
    if not isinstance(medians, list):  # one process: its own paired eager runs
        medians = timed_values(line, "eager_per_iter_time")
    medians = [value for value in medians if isinstance(value, (int, float)) and value > 0]
    return statistics.median(medians) if medians else None


def host_pulse_figure(line: dict[str, Any]) -> Optional[float]:
    """The host pulse during the line's timed runs, in seconds (the median over its
    processes), or None where it was not read."""
    pulses = [reading["host_ms"] / 1e3
              for readings in processes_of(line.get("summary") or {}) for reading in readings
              if isinstance(reading.get("host_ms"), (int, float))]
    return statistics.median(pulses) if pulses else None


def cpu_time_figure(line: dict[str, Any]) -> Optional[float]:
    """The timing thread's CPU time per iteration, in seconds (`summary.cpu_time_ms`), or None
    where the line has none (more than one compute thread, docs/timing.md)."""
    milliseconds = (line.get("summary") or {}).get("cpu_time_ms")
    return milliseconds / 1e3 if isinstance(milliseconds, (int, float)) else None


def cpu_in_pulses_figure(line: dict[str, Any]) -> Optional[float]:
    """The CPU time per iteration in host pulses (`summary.cpu_time.in_pulses`: each run's over
    the pulse's after it), where the line has both: the core's own speed divided out."""
    cpu = (line.get("summary") or {}).get("cpu_time")
    if cpu_time_figure(line) is None or not isinstance(cpu, dict):
        return None
    value = cpu.get("in_pulses")
    return value if isinstance(value, (int, float)) and value > 0 else None


def print_cpu_tables(first: dict[tuple, dict], second: dict[tuple, dict], within: float) -> None:
    """The CPU time per iteration's table, and its table in host pulses, where lines have them."""
    if any(cpu_time_figure(line) is not None for line in first.values()):
        print_table(first, second, within, "the timing thread's CPU time per iteration (what "
                    "another process's use of the cores leaves out)", cpu_time_figure)
    if any(cpu_in_pulses_figure(line) is not None for line in first.values()):
        print_table(first, second, within, "that CPU time in host pulses (what the core's own "
                    "speed leaves out)", cpu_in_pulses_figure, unit="pulses")


def flags(line: dict[str, Any]) -> str:
    """What flagged the line, shortly: slow (with its ratio), contention, variation, host-bound."""
    summary = line.get("summary") or {}
    found = []
    slow = summary.get("slow_period") or {}
    if slow.get("flagged"):
        found.append(f"slow {slow.get('ratio', 0):.2f}x")
    for reason in summary.get("unreliable_reasons") or []:
        if "contention" in reason:
            found.append("contention")
        elif "vary" in reason:
            found.append("variation")
    if summary.get("host_bound"):
        found.append(f"host-bound {summary.get('host_bound_fraction', 0):.0%}")
    return ", ".join(dict.fromkeys(found)) or "-"


def key(line: dict[str, Any]) -> tuple[str, ...]:
    experiment = line.get("experiment") or {}
    return (line["model"]["model_name"], stack_label_of(line), str(experiment.get("test")),
            str(experiment.get("precision")), str(experiment.get("batch_size")))


def sweep(runner_args: list[str], processes: Optional[int],
          folder: Path) -> tuple[float, dict[tuple, dict]]:
    """One sweep (at the runner's default --processes when None): its wall time and lines."""
    asked = [f"--processes={processes}"] if processes else []
    wall, lines = timed_sweep([*runner_args, *asked], folder)
    return wall, {key(line): line for line in lines}


def start_load(count: int) -> list[subprocess.Popen]:
    """`count` busy processes, each a Python loop, on this process's cores, each in a session
    of its own: with the scheduler's autogroups (one per session, as on most Linux desktops
    and servers), busy loops in one session would only share one group's time with the
    runner's children, which take sessions of their own."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(count)]


def stop_load(burners: list[subprocess.Popen]) -> None:
    for burner in burners:
        burner.kill()
        burner.wait()


def print_table(first: dict[tuple, dict], second: dict[tuple, dict], within: float,
                title: str, measure: Callable[[dict[str, Any]], Optional[float]] = median_time,
                unit: str = "ms") -> None:
    """Both sweeps' figures per experiment (`measure` of each line: seconds, shown in ms, or
    a figure of another `unit`, shown as it is), their difference and flags, then how many
    agree within `within`."""
    scale = 1e3 if unit == "ms" else 1.0
    rows, agreed, compared = [], 0, 0
    for experiment in sorted(set(first) & set(second)):
        a, b = measure(first[experiment]), measure(second[experiment])
        if a is None or b is None:
            rows.append([*experiment[:3], "-", "-", "-", flags(first[experiment]),
                         flags(second[experiment])])
            continue
        difference = b / a - 1.0
        compared += 1
        agreed += abs(difference) <= within
        rows.append([*experiment[:3], f"{a * scale:.3f}", f"{b * scale:.3f}", f"{difference:+.1%}",
                     flags(first[experiment]), flags(second[experiment])])
    print(f"\n{title}")
    print(tabulate(rows, headers=["model", "stack", "test", f"first {unit}", f"second {unit}",
                                  "difference", "first flagged", "second flagged"]))
    print(f"{agreed} of {compared} experiments agree within {within:.0%}")


def read_lines(path: Path) -> dict[tuple, dict]:
    """A results file's OK lines by experiment (the last line of each); `path` may also be a
    fidelity.sh OUT_DIR or a run of a table kept in benchmarks/tables (TABLE/PART)."""
    if path.is_file():
        lines = read_results(path).lines
    elif exists(path):
        lines = open_run(path).lines()
    else:
        raise SystemExit(f"no results file at {path}")
    return {key(line): line for line in lines if line.get("status") == "ok"}


def timing_core(line: dict[str, Any]) -> str:
    """Where a line's timing thread ran: `summary.timing_core`; for lines from before it was
    recorded, `fastest` where a process recorded core picks, else `any`."""
    summary = line.get("summary") or {}
    if summary.get("timing_core"):
        return str(summary["timing_core"])
    picked = any("core" in reading for reading in readings_of(summary))
    return "fastest" if picked else "any"


def timing_cores(lines: dict[tuple, dict]) -> str:
    """The --timing-core values the lines were timed with."""
    return ", ".join(sorted({timing_core(line) for line in lines.values()}))


def compare(first_path: Path, second_path: Path, within: float) -> int:
    """The two files' figures side by side, then their first processes' alone."""
    first, second = read_lines(first_path), read_lines(second_path)
    used = {str((line.get("experiment") or {}).get("processes")) for line in first.values()}
    cores = timing_cores(first), timing_cores(second)
    print_table(first, second, within, f"{first_path} against {second_path} "
                f"(--processes={', '.join(sorted(used))}; --timing-core={cores[0]})")
    if cores[0] != cores[1]:
        print(f"note: the sweeps were timed with --timing-core={cores[0]} and {cores[1]}: "
              "host-bound figures differ by where the timing thread ran, not only by the "
              "machine (docs/timing.md)")
    if any(first_process_figure(line) is not None for line in first.values()):
        print_table(first, second, within, "their first processes alone (what "
                    "--processes=1 measures)", first_process_figure)
    if any(paired_eager_figure(line) is not None for line in first.values()):
        print_table(first, second, within, "the eager runs paired with them (a difference "
                    "that the compiled figure shares came from the host or the machine; one "
                    "in the compiled figure alone, from the compiled code or the card's clock)",
                    paired_eager_figure)
    if any(host_pulse_figure(line) is not None for line in first.values()):
        print_table(first, second, within, "the host pulse during their timed runs (the "
                    "host's single-thread speed while each was timed)", host_pulse_figure)
    print_cpu_tables(first, second, within)
    print_compiled_code(first, second)
    return 0


def print_compiled_code(first: dict[tuple, dict], second: dict[tuple, dict]) -> None:
    """Where both lines of an experiment hold kernel digests (CUDA): whether their compiled
    code is the same, tuned otherwise, or other kernels (core/figures.py)."""
    rows = []
    for experiment in sorted(set(first) & set(second)):
        digests = kernel_digests_of(first[experiment]), kernel_digests_of(second[experiment])
        if all(digests):
            rows.append([*experiment[:3],
                         compiled_code_difference(*digests) or "the same launches"])
    if rows:
        print("\ntheir compiled code: the kernels one iteration launched, and their grids and "
              "blocks (a compile's tuning; docs/timing.md)")
        print(tabulate(rows, headers=["model", "stack", "test", "compiled code"]))


def main() -> int:
    return main_with(sys.argv[1:])


def main_with(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, action="append",
                        help="--processes of the runner (repeatable); default: its own default")
    parser.add_argument("--gap", type=float, default=120.0, help="seconds between the two sweeps")
    parser.add_argument("--within", type=float, default=0.03, help="agreement bound (0.03: 3%%)")
    parser.add_argument("--load", type=int, default=0,
                        help="busy processes run during the second sweep (a slow period on purpose)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("FIRST", "SECOND"),
                        help="compare two results files instead of running sweeps")
    parser.add_argument("runner", nargs=argparse.REMAINDER, help="the runner's flags (after --)")
    args, unknown = parser.parse_known_args(argv)
    if args.compare:
        return compare(*args.compare, args.within)
    runner_args = [arg for arg in [*unknown, *args.runner] if arg != "--"]
    counts = args.processes or [0]
    results: dict[int, list[dict[tuple, dict]]] = {count: [] for count in counts}
    walls: dict[int, list[float]] = {count: [] for count in counts}
    with tempfile.TemporaryDirectory(prefix="stability-") as scratch:
        for sweep_number in range(2):
            if sweep_number:
                time.sleep(args.gap)
            burners = start_load(args.load) if sweep_number else []
            try:
                for count in counts:
                    folder = Path(scratch) / f"p{count}-{sweep_number}"
                    wall, lines = sweep(runner_args, count or None, folder)
                    results[count].append(lines)
                    walls[count].append(wall)
            finally:
                stop_load(burners)
    for count in counts:
        first, second = results[count]
        used = next(iter(first.values()), {}).get("experiment", {}).get("processes")
        load = f"; {args.load} busy processes during the second" if args.load else ""
        print_table(first, second, args.within,
                    f"--processes={used} (sweeps took {walls[count][0]:.0f} s and "
                    f"{walls[count][1]:.0f} s, {args.gap:.0f} s apart{load})")
        print_cpu_tables(first, second, args.within)
    return 0


if __name__ == "__main__":
    sys.exit(main())
