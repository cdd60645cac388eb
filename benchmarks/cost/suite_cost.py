"""What each test file costs the machine: its CPU-seconds and its wall time, file by file.

`make test` runs the files side by side (pytest-xdist) on every core, so its wall time is
bounded below by the CPU the files take over the cores there are: at 2 cores, a 6-minute
suite can spend at most 720 CPU-seconds. `pytest --durations` gives each test's wall time
under that contention, and leaves out what the tests' processes spend outside pytest's own
(the runners, their children, fork servers and the pool's templates, which outlive them).
This script runs each file alone, one after the other, and reads the whole machine's busy
time (/proc/stat) over it, so every process a file starts is counted, wherever it went.

The files share one tests' cache folder, as in `make test` (tests/conftest.py: the probe's
answer, the compile cache, the server pool), in the order given: a file run later finds
what earlier ones left there. Its templates are ended at the end.

The machine must be quiet: anything else running is counted too (the idle machine's own
busy time, read over `--idle` seconds first, is printed, not subtracted).

    python -m benchmarks.cost.suite_cost [FILE ...] [-m EXPR] [--idle 5] [--cores N] [--bound 360]

With no FILE, every tests/**/test_*.py file, in the order of their names.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from tabulate import tabulate

from tests.conftest import TESTS_CACHE_PREFIX, end_templates

ROOT = Path(__file__).resolve().parents[2]
#: What pytest's last line says of a file, in its words.
OUTCOMES = ("passed", "failed", "skipped", "error", "errors", "deselected")


@dataclass(frozen=True)
class FileCost:
    """One test file run alone: its machine-wide busy CPU-seconds, its wall seconds, and
    pytest's summary line."""

    path: str
    cpu_seconds: float
    wall_seconds: float
    summary: str
    returncode: int


def busy_seconds(stat: str = "/proc/stat") -> float:
    """The CPU-seconds all cores have been busy since boot (user, nice, system, irq,
    softirq, steal), from /proc/stat's first line."""
    with open(stat, encoding="ascii") as file:
        fields = file.readline().split()
    if not fields or fields[0] != "cpu":
        raise ValueError(f"{stat} does not start with the cpu line")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def pytest_summary(output: str) -> str:
    """pytest's last line that counts outcomes ("3 passed, 1 skipped in 2.1s"), its `=`
    frame removed; "" where there is none."""
    for line in reversed(output.strip().splitlines()):
        if any(f" {word}" in line for word in OUTCOMES):
            return line.strip("= ").strip()
    return ""


def run_file(path: str, cache: Path, marker: Optional[str]) -> FileCost:
    """Run pytest on `path` (absolute, or under the repository) alone, with the shared
    tests' cache `cache`."""
    environment = dict(os.environ, XDG_CACHE_HOME=str(cache))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path]
    if marker:
        command += ["-m", marker]
    before, started = busy_seconds(), time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True)
    wall = time.monotonic() - started
    return FileCost(path, busy_seconds() - before, wall, pytest_summary(done.stdout),
                    done.returncode)


def test_files(root: Path = ROOT) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in (root / "tests").rglob("test_*.py"))


def idle_busy(seconds: float) -> float:
    """The machine's busy CPU-seconds per second while this script waits."""
    if seconds <= 0:
        return 0.0
    before = busy_seconds()
    time.sleep(seconds)
    return (busy_seconds() - before) / seconds


def table(costs: Sequence[FileCost], cores: int, bound: float, idle: float) -> str:
    total_cpu = sum(cost.cpu_seconds for cost in costs)
    rows = [(cost.path, f"{cost.cpu_seconds:.1f}", f"{cost.wall_seconds:.1f}",
             f"{cost.cpu_seconds / total_cpu:.0%}" if total_cpu else "-", cost.summary)
            for cost in sorted(costs, key=lambda cost: cost.cpu_seconds, reverse=True)]
    text = tabulate(rows, headers=("file", "CPU s", "wall s", "share", "pytest"),
                    tablefmt="github")
    allowed = cores * bound
    return (f"{text}\n\n{len(costs)} files: {total_cpu:.0f} CPU-s, "
            f"{sum(cost.wall_seconds for cost in costs):.0f} s of wall one after the other; "
            f"the idle machine was busy {idle:.2f} CPU-s per s.\n"
            f"A suite of {bound:.0f} s on {cores} cores can spend at most {allowed:.0f} "
            f"CPU-s: these take {total_cpu / allowed:.2f}x that.")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cost.suite_cost",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="test files (default: all of tests/)")
    parser.add_argument("-m", dest="marker", default="not slow",
                        help="pytest's marker expression (default: %(default)s, as make test)")
    parser.add_argument("--idle", type=float, default=5.0,
                        help="seconds to read the idle machine's busy time first")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--bound", type=float, default=360.0,
                        help="the suite's bound in seconds of wall time (default: 360)")
    args = parser.parse_args(argv)
    files = args.files or test_files()
    missing = [name for name in files if not (ROOT / name).is_file()]
    if missing:
        parser.error(f"no such test file: {', '.join(missing)}")
    # A run stopped (Ctrl-C, or SIGTERM from a time limit) prints what it measured so far.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    idle = idle_busy(args.idle)
    cache = Path(tempfile.mkdtemp(prefix=TESTS_CACHE_PREFIX))
    costs: list[FileCost] = []
    stopped = False
    try:
        for name in files:
            cost = run_file(name, cache, args.marker)
            costs.append(cost)
            print(f"{cost.cpu_seconds:7.1f} CPU-s {cost.wall_seconds:7.1f} s  {name}: "
                  f"{cost.summary or 'no summary (exit ' + str(cost.returncode) + ')'}",
                  file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        stopped = True
    finally:
        end_templates(cache / "servers")
        shutil.rmtree(cache, ignore_errors=True)
    print(table(costs, args.cores, args.bound, idle))
    if stopped:
        print(f"stopped after {len(costs)} of {len(files)} files", file=sys.stderr)
        return 130
    return 0 if all(cost.returncode in (0, 5) for cost in costs) else 1


if __name__ == "__main__":
    sys.exit(main())
