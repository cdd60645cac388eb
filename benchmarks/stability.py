"""Do two sweeps of the same models on the same machine, minutes apart, agree?

Runs one sweep twice (the same command, fresh results each time) with `--gap` seconds
between them, for each `--processes` value asked (the sweeps of the values alternate, so
the machine's drift reaches each alike), and prints per experiment both figures (the median
over processes, else over the timed runs), their difference, and whether either line was
flagged (unreliable: contention, variation, a slow period; host-bound). The last lines say
how many experiments agree within `--within` (3% by default), per --processes value.

    python benchmarks/stability.py --accelerator=cpu -k '^mlp$' --dynamo=None --dynamo=inductor \\
        --processes 1 --processes 3 --gap 120 [-- more runner flags]

Everything after `--` goes to the runner as it is (suite, models, precision, batch size...).

`--load N` makes the second sweep's period slow on purpose: N busy processes (one Python
loop each, on this process's cores) run during it, and are ended after it. The first
sweep's lines should then not be flagged, and the second one's should (slow period,
contention).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.timed_sweep import timed_sweep  # noqa: E402
from core.schema import stack_label_of, timed_values  # noqa: E402


def figure(line: dict[str, Any]) -> Optional[float]:
    """The line's figure: the median over processes, else over the timed runs."""
    processes = (line.get("summary") or {}).get("processes")
    if isinstance(processes, dict) and isinstance(processes.get("median"), (int, float)):
        return processes["median"]
    times = [t for t in timed_values(line, "per_iter_time") if isinstance(t, (int, float))]
    return statistics.median(times) if times else None


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, action="append",
                        help="--processes of the runner (repeatable); default: its own default")
    parser.add_argument("--gap", type=float, default=120.0, help="seconds between the two sweeps")
    parser.add_argument("--within", type=float, default=0.03, help="agreement bound (0.03: 3%%)")
    parser.add_argument("--load", type=int, default=0,
                        help="busy processes run during the second sweep (a slow period on purpose)")
    parser.add_argument("runner", nargs=argparse.REMAINDER, help="the runner's flags (after --)")
    args, unknown = parser.parse_known_args()
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
        rows, agreed, compared = [], 0, 0
        for experiment in sorted(set(first) & set(second)):
            a, b = figure(first[experiment]), figure(second[experiment])
            if a is None or b is None:
                rows.append([*experiment[:3], "-", "-", "-", flags(first[experiment]),
                             flags(second[experiment])])
                continue
            difference = b / a - 1.0
            compared += 1
            agreed += abs(difference) <= args.within
            rows.append([*experiment[:3], f"{a * 1e3:.3f}", f"{b * 1e3:.3f}", f"{difference:+.1%}",
                         flags(first[experiment]), flags(second[experiment])])
        used = next(iter(first.values()), {}).get("experiment", {}).get("processes")
        load = f"; {args.load} busy processes during the second" if args.load else ""
        print(f"\n--processes={used} (sweeps took {walls[count][0]:.0f} s and "
              f"{walls[count][1]:.0f} s, {args.gap:.0f} s apart{load})")
        print(tabulate(rows, headers=["model", "stack", "test", "first ms", "second ms",
                                      "difference", "first flagged", "second flagged"]))
        print(f"{agreed} of {compared} experiments agree within {args.within:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
