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

`--per-test [N]` runs the files in one pytest instead, a test at a time (no pytest-xdist, in
the suite's order: long tests first), and reads the busy time around each test
(benchmarks/cost/per_test_cpu.py): it prints the N tests that cost most (default 30). A
module's shared fixture counts in the first test that asks for it.

`--by-process` runs the files in one pytest as `make test` runs its main part (pytest-xdist,
a worker more than the cores, a file per worker at a time) while a thread reads /proc every
0.2 s, and prints the CPU-seconds by kind of process: the pool's templates and what they
fork, fork servers, spawned children, runner invocations, probes, the xdist workers' own
work, the reference tools, benchmark scripts, C/C++ builds, Ray, Chromium, pip and uv, git.
A process that lives under 0.2 s may go unseen; the machine's busy time over the run is
printed beside the sum.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from tabulate import tabulate

from benchmarks.cost import per_test_cpu
from benchmarks.cost.per_test_cpu import busy_seconds
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


def pytest_summary(output: str) -> str:
    """pytest's last line that counts outcomes ("3 passed, 1 skipped in 2.1s"), its `=`
    frame removed; "" where there is none."""
    for line in reversed(output.strip().splitlines()):
        if any(f" {word}" in line for word in OUTCOMES):
            return line.strip("= ").strip()
    return ""


def failed_tests(output: str) -> list[str]:
    """The tests pytest's short summary names as failed or in error ("FAILED path::test -
    reason"), in its order."""
    return [line.strip() for line in output.splitlines()
            if line.startswith(("FAILED ", "ERROR "))]


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


@dataclass(frozen=True)
class PerTestCost:
    """One test, run in a pytest that ran nothing else at the time: the machine's busy
    CPU-seconds and the wall seconds over its setup, call and teardown."""

    test: str
    cpu_seconds: float
    wall_seconds: float


def run_per_test(paths: Sequence[str], cache: Path, marker: Optional[str],
                 record: Path) -> tuple[str, int]:
    """Run pytest once on `paths`, a test at a time, with benchmarks/cost/per_test_cpu.py
    appending each test's cost to `record` (read_test_costs): pytest's summary and its exit
    status. Ctrl-C (or SIGTERM, made one by main) stops pytest; `record` keeps what it
    recorded."""
    environment = dict(os.environ, XDG_CACHE_HOME=str(cache),
                       **{per_test_cpu.OUTPUT_VARIABLE: str(record)})
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
               "-p", "benchmarks.cost.per_test_cpu", *paths]
    if marker:
        command += ["-m", marker]
    run = subprocess.Popen(command, cwd=ROOT, env=environment, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = run.communicate()
    except KeyboardInterrupt:
        run.send_signal(signal.SIGINT)
        run.communicate()
        raise
    return "\n".join([pytest_summary(output), *failed_tests(output)]), run.returncode


def read_test_costs(record: Path) -> list[PerTestCost]:
    """The plugin's lines in `record` (none where it wrote none)."""
    if not record.exists():
        return []
    costs = []
    for text in record.read_text(encoding="utf-8").splitlines():
        entry = json.loads(text)
        costs.append(PerTestCost(entry["test"], float(entry["cpu"]), float(entry["wall"])))
    return costs


def per_test_table(costs: Sequence[PerTestCost], top: int, cores: int, bound: float) -> str:
    """The `top` tests by CPU-seconds, and the totals over all of `costs`."""
    total_cpu = sum(cost.cpu_seconds for cost in costs)
    ranked = sorted(costs, key=lambda cost: cost.cpu_seconds, reverse=True)[:top]
    rows = [(cost.test, f"{cost.cpu_seconds:.1f}", f"{cost.wall_seconds:.1f}",
             f"{cost.cpu_seconds / total_cpu:.1%}" if total_cpu else "-") for cost in ranked]
    text = tabulate(rows, headers=("test", "CPU s", "wall s", "share"), tablefmt="github")
    shown = sum(cost.cpu_seconds for cost in ranked)
    allowed = cores * bound
    return (f"{text}\n\n{len(costs)} tests: {total_cpu:.0f} CPU-s, "
            f"{sum(cost.wall_seconds for cost in costs):.0f} s of wall one after the other; "
            f"the {len(ranked)} above take {shown:.0f} CPU-s "
            f"({shown / total_cpu:.0%}).\n" if total_cpu else f"{text}\n\nno test recorded.\n") + (
            f"A suite of {bound:.0f} s on {cores} cores can spend at most {allowed:.0f} "
            f"CPU-s: these take {total_cpu / allowed:.2f}x that.")


#: How often --by-process reads /proc.
POLL_SECONDS = 0.2
COMPILERS = frozenset({"cc1plus", "cc1", "gcc", "g++", "c++", "cc", "as", "ld", "collect2"})
#: What the reference tools' commands hold (the harness runs from its own folder).
REFERENCE_TOOLS = ("dynamobench", "pytorch_xla_benchmarks", "huggingface.py", "timm_models.py",
                   "torchbench.py", "result_analyzer.py", "aggregate.py")


@dataclass
class SeenProcess:
    """A process the poller saw: its command, its parent, its CPU-seconds when first seen
    (before the run: not counted) and the most it had."""

    pid: int
    parent: int
    name: str
    command: str
    cpu_at_first_sight: float
    cpu: float


def process_kind(seen: SeenProcess, parent: Optional[SeenProcess]) -> str:
    """What a process was, from its command (a forked process keeps its parent's)."""
    command, name = seen.command, seen.name
    forked = parent is not None and parent.command == command
    if name in COMPILERS:
        return "C/C++ builds"
    if "raylet" in command or "gcs_server" in command or name.startswith("ray::") \
            or "/ray/" in command:
        return "Ray"
    if "chrom" in name.lower():
        return "Chromium"
    if "runner.run.process.forkserver_pool" in command:
        return "forked from the pool's templates" if forked else "the pool's templates"
    if "runner.run.process.forkserver_server" in command:
        return "forked from fork servers" if forked else "fork servers"
    if "child.worker" in command or "child/worker.py" in command:
        return "spawned experiment children"
    if "runner.plan.probe" in command or "runner/plan/probe.py" in command:
        return "probes"
    if "experiment_runner.py" in command or "experiment-runner" in command:
        return "runner invocations"
    if "import sys;exec(eval(sys.stdin" in command:
        return "pytest-xdist workers (the tests' own work)"
    if " -m pytest" in command:
        return "pytest"
    if any(part in command for part in REFERENCE_TOOLS):
        return "the reference tools (the harness, the analyzer)"
    if " -m benchmarks." in command or "/benchmarks/" in command:
        return "benchmark scripts (fidelity checks, costs)"
    if name == "uv" or any(part == "pip" or part.endswith(("/pip", "pip/__main__.py"))
                           for part in command.split()[:3]):
        return "pip and uv"
    if name == "git":
        return "git"
    if name.startswith("python"):
        return "other Python"
    return "other"


def read_process(pid: str) -> Optional[tuple[int, str, float, int]]:
    """A process's parent, name, CPU-seconds and start time (/proc/PID/stat), or None where
    it ended."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    name = stat[stat.find("(") + 1:stat.rfind(")")]
    fields = stat[stat.rfind(")") + 2:].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[1]), name, (int(fields[11]) + int(fields[12])) / ticks, int(fields[19])


class ProcessPoller(threading.Thread):
    """Reads every process's CPU-seconds from /proc until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: dict[tuple[int, int], SeenProcess] = {}
        self._stop_event = threading.Event()
        self._first = True

    def run(self) -> None:
        while True:
            self.poll()
            self._first = False
            if self._stop_event.wait(POLL_SECONDS):
                self.poll()
                return

    def stop(self) -> None:
        self._stop_event.set()
        self.join()

    def poll(self) -> None:
        for pid in (entry for entry in os.listdir("/proc") if entry.isdigit()):
            read = read_process(pid)
            if read is None or int(pid) == os.getpid():
                continue
            parent, name, cpu, started = read
            key = (int(pid), started)
            seen = self.seen.get(key)
            if seen is None:
                try:
                    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    raw = b""
                command = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
                self.seen[key] = SeenProcess(int(pid), parent, name, command,
                                             cpu if self._first else 0.0, cpu)
            else:
                seen.cpu = max(seen.cpu, cpu)


def by_process_table(processes: Sequence[SeenProcess], busy: float, wall: float) -> str:
    """CPU-seconds by kind of process, with the machine's busy time beside their sum."""
    by_pid = {process.pid: process for process in processes}
    cpu: dict[str, float] = {}
    count: dict[str, int] = {}
    for process in processes:
        spent = process.cpu - process.cpu_at_first_sight
        if spent <= 0:
            continue
        kind = process_kind(process, by_pid.get(process.parent))
        cpu[kind] = cpu.get(kind, 0.0) + spent
        count[kind] = count.get(kind, 0) + 1
    total = sum(cpu.values())
    rows = [(kind, count[kind], f"{spent:.1f}", f"{spent / total:.0%}" if total else "-")
            for kind, spent in sorted(cpu.items(), key=lambda item: -item[1])]
    text = tabulate(rows, headers=("processes", "count", "CPU s", "share"), tablefmt="github")
    return (f"{text}\n\nseen: {total:.0f} CPU-s; the machine was busy {busy:.0f} CPU-s over "
            f"{wall:.0f} s of wall (the rest: processes shorter than {POLL_SECONDS} s, the "
            f"kernel, anything else running).")


def run_by_process(paths: Sequence[str], cache: Path, marker: Optional[str],
                   workers: int) -> tuple[str, int, str]:
    """Run pytest once on `paths` as `make test` runs its main part, reading /proc meanwhile:
    pytest's summary, its exit status and the table (`by_process_table`)."""
    environment = dict(os.environ, XDG_CACHE_HOME=str(cache))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n",
               str(workers), "--dist", "loadfile", *paths]
    if marker:
        command += ["-m", marker]
    poller = ProcessPoller()
    poller.start()
    before, started = busy_seconds(), time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True,
                              text=True)
    finally:
        poller.stop()
    wall, busy = time.monotonic() - started, busy_seconds() - before
    summary = "\n".join([pytest_summary(done.stdout), *failed_tests(done.stdout)])
    return summary, done.returncode, by_process_table(list(poller.seen.values()), busy, wall)


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
    parser.add_argument("--per-test", type=int, nargs="?", const=30, default=None, metavar="N",
                        help="one pytest, a test at a time: print the N tests that cost most "
                             "(default N: 30)")
    parser.add_argument("--by-process", action="store_true",
                        help="one pytest as make test runs it: CPU-seconds by kind of process")
    args = parser.parse_args(argv)
    files = args.files or test_files()
    missing = [name for name in files if not (ROOT / name).is_file()]
    if missing:
        parser.error(f"no such test file: {', '.join(missing)}")
    # A run stopped (Ctrl-C, or SIGTERM from a time limit) prints what it measured so far.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if args.per_test is not None and args.per_test < 1:
        parser.error(f"--per-test {args.per_test}: give 1 or more tests to show")
    idle = idle_busy(args.idle)
    cache = Path(tempfile.mkdtemp(prefix=TESTS_CACHE_PREFIX))
    if args.per_test is not None:
        return per_test_main(files, cache, args)
    if args.by_process:
        return by_process_main(files, cache, args)
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


def per_test_main(files: Sequence[str], cache: Path, args: argparse.Namespace) -> int:
    """--per-test: one pytest over `files`; print the table of the costliest tests."""
    stopped = False
    summary, returncode = "", 0
    record = cache / "per-test.jsonl"
    try:
        summary, returncode = run_per_test(files, cache, args.marker, record)
    except KeyboardInterrupt:
        stopped = True
    finally:
        costs = read_test_costs(record)
        end_templates(cache / "servers")
        shutil.rmtree(cache, ignore_errors=True)
    print(per_test_table(costs, args.per_test, args.cores, args.bound))
    if stopped:
        print(f"stopped after {len(costs)} tests", file=sys.stderr)
        return 130
    print(f"pytest: {summary or 'no summary (exit ' + str(returncode) + ')'}", file=sys.stderr)
    return 0 if returncode in (0, 5) else 1


def by_process_main(files: Sequence[str], cache: Path, args: argparse.Namespace) -> int:
    """--by-process: one pytest over `files`; print the CPU-seconds by kind of process."""
    try:
        summary, returncode, text = run_by_process(files, cache, args.marker, args.cores + 1)
    finally:
        end_templates(cache / "servers")
        shutil.rmtree(cache, ignore_errors=True)
    print(text)
    print(f"pytest: {summary or 'no summary (exit ' + str(returncode) + ')'}", file=sys.stderr)
    return 0 if returncode in (0, 5) else 1


if __name__ == "__main__":
    sys.exit(main())
