"""The harness's own cost per experiment, with children spawned and forked side by side.

For each start method (spawn: a fresh interpreter per child; forkserver: children forked
from a server that imported the stack's libraries once), the runner sweeps the builtin
suite on CPU with `--repeat=1 --warmup=1`, once with one experiment and once with several.
The runs alternate between the start methods (A B A B ...) so that the machine's load
hits both alike, and each figure is the median over `--rounds`.

    per extra experiment = (T(n) - T(1)) / (n - 1)
    measuring            = (M(n) - M(1)) / (n - 1)
    overhead             = per extra experiment - measuring
    fixed                = T(1) - M(1) - overhead

M is the children's own measuring time summed over a sweep's lines: the timed runs, the
warm-up, and the short idle probe the contention check takes when the timed runs are too
short to judge (child/trust.py). That is what any harness must spend; the overhead is
everything else: starting the child, importing, building the line, claiming and appending.
The n - 1 extra experiments are the heavier ones (the one experiment is the smallest), so
their measuring time is their sum, M(n) - M(1), not a typical line's.

Both sweeps run at `--processes` (default: the CPU's default, core.fields.DEFAULT_PROCESSES).
Each further timing process of an experiment costs a child too; one more sweep of the one
experiment at `--processes` + `--more-processes` gives it:

    per further process  = (T'(1) - T(1)) / more
    its overhead         = per further process - (M'(1) - M(1)) / more

and the cost per experiment at P processes is the overhead per experiment plus P - 1 times
a further process's overhead (printed for the CPU's default and CUDA's).

    python -m benchmarks.overhead [--rounds 3] [--stack eager|pjrt] [--processes P]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from benchmarks.timed_sweep import timed_sweep
from core.fields import DEFAULT_PROCESSES
from core.schema import timed_values
from api import MIN_WINDOW_SECONDS
STACKS = {
    "eager": ["--xla=None", "--dynamo=None"],
    "pjrt": ["--xla=PJRT", "--dynamo=None"],
}
#: One experiment that trains, as some of MANY do: an eager sweep that trains forks its
#: children from a server that imported dynamo too (about 1 s more than torch alone), a
#: cost of the sweep that T(1) must hold as T(n) does, or it counts as the experiments'.
ONE = ["-k", "^mlp$", "--test=train"]
MANY = ["--test=eval", "--test=train"]  # 3 builtin models x 2 tests


def sweep(method: str, stack: str, selection: list[str], folder: Path,
          processes: int = 1, extra: tuple[str, ...] = ()) -> tuple[float, list[dict]]:
    wall, lines = timed_sweep(["--accelerator=cpu", *STACKS[stack], *selection, "--repeat=1",
                               "--warmup=1", f"--processes={processes}", *extra,
                               f"--start-method={method}"], folder, method)
    if any(line["status"] != "ok" for line in lines):
        raise SystemExit(f"an experiment failed ({method}): "
                         f"{[line['metrics'].get('error', '')[:300] for line in lines]}")
    return wall, lines


def measuring_seconds(line: dict) -> float:
    """What the children spent measuring: warm-up, timed runs, and the idle contention probe,
    over every timing process."""
    summary = line.get("summary", {})
    windows = summary.get("cpu_processes") or [summary.get("cpu") or {}]
    probe = MIN_WINDOW_SECONDS * sum(
        (window or {}).get("others_measured", "").startswith("idle probe") for window in windows)
    processes = summary.get("processes") or {}
    warmup = (sum(processes["warmup_seconds"]) if processes.get("warmup_seconds")
              else sum(summary.get("warmup_times") or []))
    # The cold-start entry that leads the per-run list is the first warm-up, counted above.
    return warmup + sum(timed_values(line, "per_iter_time")) + probe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stack", choices=sorted(STACKS), default="eager")
    parser.add_argument("--processes", type=int, default=DEFAULT_PROCESSES["cpu"],
                        help="timing processes per experiment (default: the CPU's default)")
    parser.add_argument("--more-processes", type=int, default=2,
                        help="further processes of the sweep that measures their cost")
    parser.add_argument("--no-reference-workload", action="store_true",
                        help="without the slow-period reference workload (to see its cost)")
    args = parser.parse_args()
    more = args.processes + args.more_processes
    methods = ("spawn", "forkserver")
    walls: dict[tuple[str, str], list[float]] = {}
    measured: dict[tuple[str, str], list[float]] = {}
    count = 0
    with tempfile.TemporaryDirectory(prefix="overhead-") as scratch:
        for round_number in range(args.rounds):
            for method in methods:
                for name, selection, processes in (("one", ONE, args.processes),
                                                   ("many", MANY, args.processes),
                                                   ("more", ONE, more)):
                    folder = Path(scratch) / f"{method}-{name}-{round_number}"
                    wall, lines = sweep(method, args.stack, selection, folder, processes,
                                        ("--no-reference-workload",) if args.no_reference_workload else ())
                    walls.setdefault((method, name), []).append(wall)
                    measured.setdefault((method, name), []).append(
                        sum(measuring_seconds(line) for line in lines))
                    if name == "many":
                        count = len(lines)
    reference = " --no-reference-workload" if args.no_reference_workload else ""
    print(f"builtin suite, {args.stack}, CPU, --repeat=1 --warmup=1 --processes={args.processes}{reference}; "
          f"median of {args.rounds} rounds, start methods alternated; 1 experiment vs {count}")
    print(f"{'start method':<12} {'T(1)':>7} {'T(n)':>7} {'per extra':>10} {'fixed':>7} "
          f"{'measuring':>10} {'overhead':>9}")
    per_extra = {}
    for method in methods:
        one = statistics.median(walls[(method, "one")])
        many = statistics.median(walls[(method, "many")])
        extra = (many - one) / (count - 1)
        measured_one = statistics.median(measured[(method, "one")])
        inner = (statistics.median(measured[(method, "many")]) - measured_one) / (count - 1)
        per_extra[method] = extra - inner
        fixed = one - measured_one - per_extra[method]
        print(f"{method:<12} {one:>6.2f}s {many:>6.2f}s {extra:>9.3f}s {fixed:>6.2f}s "
              f"{inner:>9.3f}s {extra - inner:>8.3f}s")
    ratio = per_extra["spawn"] / per_extra["forkserver"] if per_extra["forkserver"] > 0 else float("inf")
    print(f"overhead per experiment at --processes={args.processes}: spawn "
          f"{per_extra['spawn']:.3f} s, forkserver {per_extra['forkserver']:.3f} s ({ratio:.1f}x less)")
    print(f"\none experiment at --processes={args.processes} vs {more}")
    print(f"{'start method':<12} {'per process':>12} {'measuring':>10} {'overhead':>9} "
          + " ".join(f"{'P=' + str(p) + ' cost':>10}" for p in sorted(set(DEFAULT_PROCESSES.values()))))
    for method in methods:
        one = statistics.median(walls[(method, "one")])
        further = (statistics.median(walls[(method, "more")]) - one) / args.more_processes
        inner = (statistics.median(measured[(method, "more")])
                 - statistics.median(measured[(method, "one")])) / args.more_processes
        costs = " ".join(f"{per_extra[method] + (p - args.processes) * (further - inner):>9.3f}s"
                         for p in sorted(set(DEFAULT_PROCESSES.values())))
        print(f"{method:<12} {further:>11.3f}s {inner:>9.3f}s {further - inner:>8.3f}s {costs}")
    print("P=N cost: the overhead per experiment at N timing processes (measuring aside), "
          f"defaults {DEFAULT_PROCESSES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
