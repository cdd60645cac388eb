"""Soak test: several runners on one output folder, killed and restarted at random.

N runner slots run the faults suite (with a short --subprocess-timeout) and the builtin
suite on one output folder; at random moments a runner (mostly one running an experiment's child)
gets SIGKILL, SIGTERM or SIGINT and its slot starts a runner again (of either suite). When
the kills are spent or every experiment is recorded, the runners still going finish, then
one last runner per suite completes the sweep. Then the invariants are checked and the
figures printed:

- the results file parses (no bad line);
- exactly one line per planned experiment: none missing, no duplicate, none unplanned;
- every line's metrics are those of its own child (the result.json and spec.json in the
  line's own `artifacts` folder, from the line's own run);
- no process of any runner is left (runners, guards, workers, grandchildren such as the
  `hang` model's: everything started carries this soak's marker variable), no scratch
  folder is left, no claim is left;
- every runner stopped by SIGTERM or SIGINT exited 143 or 130 (0 if it had just finished)
  without a traceback.

    python benchmarks/soak.py [--runners 3] [--kills 12] [--seed 1] [--keep DIR]

Exit status 0 when there is no violation.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from core.config import fingerprint_of_line  # noqa: E402
from core.results_file import read_results  # noqa: E402

MARKER = "EXPERIMENT_SOAK_MARKER"
COMMON = ["--accelerator=cpu", "--xla=None", "--dynamo=None", "--warmup=0", "--no-progress",
          "--log-level=warning"]
SUITES = {
    "faults": ["--suite-name=faults", "--test=eval", "--repeat=1", "--subprocess-timeout=4",
               "--memory-limit-mb=900"],
    "builtin": ["--suite-name=builtin", "--test=eval", "--test=train", "--precision=fp32",
                "--precision=bf16", "--repeat=2"],
}
STOP_SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT)


@dataclass
class Runner:
    slot: int
    suite: str
    process: subprocess.Popen
    log: Path
    signal_sent: Optional[int] = None
    started: float = field(default_factory=time.monotonic)


@dataclass
class Figures:
    runners: int = 0
    kills: Counter = field(default_factory=Counter)
    kills_mid_experiment: int = 0
    planned: int = 0
    lines: int = 0
    taken_over: int = 0
    violations: Counter = field(default_factory=Counter)
    details: list[str] = field(default_factory=list)

    def violation(self, kind: str, detail: str) -> None:
        self.violations[kind] += 1
        if len(self.details) < 30:
            self.details.append(f"{kind}: {detail}")


class Soak:
    def __init__(self, folder: Path, slots: int, kills: int, rng: random.Random) -> None:
        self.folder, self.slots, self.kill_budget, self.rng = folder, slots, kills, rng
        self.output = folder / "output"
        self.tmp = folder / "tmp"
        self.logs = folder / "logs"
        for made in (self.tmp, self.logs):
            made.mkdir(parents=True, exist_ok=True)
        self.marker = uuid.uuid4().hex
        self.environment = dict(os.environ, TMPDIR=str(self.tmp), **{MARKER: self.marker})
        self.environment["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
        self.figures = Figures()
        self.finished: dict[str, Runner] = {}
        self.timeline: list[str] = []
        self.began = time.monotonic()

    def command(self, suite: str) -> list[str]:
        return [sys.executable, str(ROOT / "experiment_runner.py"), *COMMON, *SUITES[suite],
                f"--output-dirname={self.output}"]

    def start(self, slot: int, suite: str) -> Runner:
        self.figures.runners += 1
        log = self.logs / f"runner-{self.figures.runners:03d}-{suite}.log"
        with open(log, "wb") as handle:
            process = subprocess.Popen(self.command(suite), env=self.environment, cwd=str(ROOT),
                                       stdout=handle, stderr=subprocess.STDOUT)
        return Runner(slot, suite, process, log)

    def run(self) -> Figures:
        suites = list(SUITES)
        self.planned = planned_fingerprints([COMMON + SUITES[suite] for suite in SUITES])
        running = {slot: self.start(slot, suites[slot % len(suites)]) for slot in range(self.slots)}
        kills = 0
        while kills < self.kill_budget and not self.complete():
            time.sleep(self.rng.uniform(0.3, 2.0))
            for slot, runner in list(running.items()):  # restart those that finished
                if runner.process.poll() is not None:
                    self.finished[runner.log.name] = runner
                    running[slot] = self.start(slot, self.rng.choice(suites))
            victim = running[self.pick_victim(running)]
            signum = self.rng.choice(STOP_SIGNALS)
            if victim.process.poll() is None:
                busy = runs_a_child(victim)
                self.figures.kills_mid_experiment += busy
                self.timeline.append(f"{time.monotonic() - self.began:6.1f} s: "
                                     f"{signal.Signals(signum).name} to {victim.log.name}"
                                     f"{' (running a child)' if busy else ''}")
                victim.process.send_signal(signum)
                victim.signal_sent = signum
                self.figures.kills[signal.Signals(signum).name] += 1
                kills += 1
            victim.process.wait(timeout=180)
            self.finished[victim.log.name] = victim
            running[slot] = self.start(slot, self.rng.choice(suites))
        for runner in running.values():
            runner.process.wait(timeout=900)
            self.finished[runner.log.name] = runner
        last = [self.start(-1, suite) for suite in suites]  # completes whatever is left
        for runner in last:
            runner.process.wait(timeout=900)
            self.finished[runner.log.name] = runner
        self.check()
        return self.figures

    def pick_victim(self, running: dict[int, Runner]) -> int:
        """Mostly a runner in the middle of an experiment (waiting a little for one): that
        is where claims, children and lines are at stake; otherwise any runner."""
        if self.rng.random() < 0.9:
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:
                busy = [slot for slot, runner in running.items() if runs_a_child(runner)]
                if busy:
                    return self.rng.choice(busy)
                time.sleep(0.1)
        # Not in its first second: before the interpreter runs the runner's first line, no
        # program can handle a signal, and a runner killed then has started nothing.
        time.sleep(max(0.0, max(runner.started for runner in running.values()) + 1 - time.monotonic()))
        return self.rng.choice(sorted(running))

    def complete(self) -> bool:
        """Whether the results hold every planned experiment (the kills stop then)."""
        lines = read_results(self.output / "results.jsonl").lines
        return self.planned <= {line.get("fingerprint") for line in lines}

    # The invariants.

    def check(self) -> None:
        self.check_exits()
        self.check_processes_and_leftovers()
        self.check_lines()

    def check_exits(self) -> None:
        for runner in self.finished.values():
            text = runner.log.read_text(errors="replace")
            self.figures.taken_over += text.count("taking over an experiment")
            code = runner.process.returncode
            if "Traceback" in text:
                self.figures.violation("unclean exit", f"{runner.log.name}: a traceback")
            expected = {None: {0}, signal.SIGKILL: {-signal.SIGKILL, 0},
                        signal.SIGTERM: {143, 0}, signal.SIGINT: {130, 0}}[runner.signal_sent]
            if code not in expected:
                self.figures.violation("unclean exit", f"{runner.log.name}: exit status {code}")

    def check_processes_and_leftovers(self) -> None:
        deadline = time.monotonic() + 20
        while True:
            left = marked_processes(self.marker)
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        for process in left:
            self.figures.violation("orphan process", f"pid {process.pid}: {' '.join(process.cmdline())[:120]}")
        for folder in self.tmp.glob("experiment-runner-*"):
            self.figures.violation("scratch folder left", folder.name)
        if (self.output / "results.jsonl.claims").exists():
            claims = json.loads((self.output / "results.jsonl.claims").read_text())
            self.figures.violation("claim left", ", ".join(fp[:12] for fp in claims))

    def check_lines(self) -> None:
        planned = self.planned
        self.figures.planned = len(planned)
        read = read_results(self.output / "results.jsonl")
        self.figures.lines = len(read.lines)
        for bad in read.bad_lines:
            self.figures.violation("unreadable line", f"line {bad.lineno}: {bad.reason}")
        counts = Counter(line.get("fingerprint") for line in read.lines)
        for fp in planned - set(counts):
            self.figures.violation("missing", fp[:12])
        for fp, count in counts.items():
            if fp not in planned:
                self.figures.violation("unplanned", str(fp)[:12])
            if count > 1:
                self.figures.violation("duplicate", f"{str(fp)[:12]} x{count}")
        folders = Counter(json.dumps(line.get("artifacts"), sort_keys=True) for line in read.lines)
        for folder, count in folders.items():
            if count > 1:
                self.figures.violation("foreign metrics", f"{count} lines share {folder}")
        for line in read.lines:
            problem = foreign_metrics(self.output, line)
            if problem:
                self.figures.violation("foreign metrics", f"{line.get('experiment_id')}: {problem}")


def foreign_metrics(output: Path, line: dict) -> Optional[str]:
    """Why the line's metrics may not be its own child's, or None."""
    if fingerprint_of_line(line) != line.get("fingerprint"):
        return "its fingerprint is not its model and experiment's"
    if line.get("status") == "skipped" and not line.get("artifacts"):
        return None
    folder = output / (line.get("artifacts") or {}).get("time", "?")
    if folder.parts[-2] != line.get("run_id"):
        return f"its folder {folder} is not of its run {line.get('run_id')}"
    try:
        spec = json.loads((folder / "spec.json").read_text())
    except (OSError, ValueError) as error:
        return f"no readable spec.json in its folder ({error})"
    experiment = {k: v for k, v in line["experiment"].items() if k != "accelerator_model"}
    if spec["model"] != line["model"] or spec["experiment"] != experiment:
        return "its folder's spec names another experiment"
    try:
        result = json.loads((folder / "result.json").read_text())
    except FileNotFoundError:
        return None if line.get("status") == "failed" else "no result.json for a line that is not failed"
    except (OSError, ValueError) as error:
        return f"unreadable result.json ({error})"
    metrics = line.get("metrics") or {}
    for name, value in (result.get("metrics") or {}).items():
        if name != "peak_host_memory_bytes" and metrics.get(name) != value:
            return f"metrics.{name} differs from its child's result.json"
    return None


def planned_fingerprints(commands: list[list[str]]) -> set[str]:
    from models import get_suite
    from runner.plan.parser import build_parser, matrix_request
    from runner.plan.matrix import build_plan
    from runner.plan.probe import probe_host

    host = probe_host()
    planned = set()
    for command in commands:
        args = build_parser().parse_args(command)
        request = matrix_request(args)
        suite = get_suite(args.suite_name, reduced=request.reduced)
        planned |= {p.fingerprint for p in build_plan(suite, request, host).experiments}
    return planned


def runs_a_child(runner: Runner) -> bool:
    """Whether the runner is running an experiment's child right now."""
    try:
        return any("runner.child.worker" in child.cmdline() for child in
                   psutil.Process(runner.process.pid).children())
    except psutil.Error:
        return False


def marked_processes(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARKER) == marker and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.Error, OSError):
            continue
    return found


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runners", type=int, default=3, help="runner slots at once")
    parser.add_argument("--kills", type=int, default=12, help="signals sent to runners")
    parser.add_argument("--seed", type=int, default=None, help="seed of the random schedule")
    parser.add_argument("--keep", help="keep the output, logs and scratch folder here")
    parser.add_argument("--verbose", action="store_true", help="print when each signal was sent")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="soak-"))
    start = time.monotonic()
    soak = Soak(folder, args.runners, args.kills, random.Random(seed))
    try:
        figures = soak.run()
    finally:
        for process in marked_processes(soak.marker):  # never leave anything, even on failure
            process.kill()
    kills = ", ".join(f"{name} {count}" for name, count in sorted(figures.kills.items()))
    print(f"soak (seed {seed}): {args.runners} runner slots, {figures.runners} runners started, "
          f"{sum(figures.kills.values())} kills ({kills}; {figures.kills_mid_experiment} while a "
          f"child ran), {figures.planned} planned experiments, "
          f"{figures.lines} lines, {figures.taken_over} claims taken over, "
          f"{time.monotonic() - start:.0f} s")
    total = sum(figures.violations.values())
    kinds = ("missing", "duplicate", "unplanned", "foreign metrics", "unreadable line",
             "orphan process", "scratch folder left", "claim left", "unclean exit")
    print(f"violations: {total} (" + ", ".join(f"{kind} {figures.violations[kind]}" for kind in kinds) + ")")
    for detail in figures.details:
        print(f"  {detail}")
    if args.verbose:
        print("\n".join(soak.timeline))
    if args.keep:
        print(f"kept in {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
