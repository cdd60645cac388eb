"""Soak test: several runners on one output folder, killed and restarted at random.

N runner slots run the faults suite (with a short --subprocess-timeout), the builtin suite
and the dummy suite on one output folder, each runner with --jobs=1 or --jobs=2, and each
one of two versions of the runner: this tree, or a copy of it whose default matmul
precision differs (so the two plan different experiments for the same command, and share
the results file, its lock and its claims). At random moments one fault strikes a runner
(mostly one running an experiment's child): SIGKILL, SIGTERM or SIGINT (its slot then
starts a runner again, of any suite and version); SIGSTOP, then SIGCONT a few seconds
later, while it holds claims; or SIGKILL to one of its fork servers. Other faults strike
the files beside the results, which the runners share through their cache folder (this
soak's own): one side file of each kind (the claims file, the reference workload's history,
the probe's cached answer, the workload cache's entries) overwritten with bytes that are no
JSON or JSON of the wrong shape, or replaced by a FIFO or a symbolic link that loops; readings in the reference history stamped a month ahead
(the clock set back since), far below any real reading; a line of a newer schema whose
experiment holds a field this version does not know, for an experiment not yet recorded; a
runner started with a non-UTF-8 argument; a runner stopped by SIGTERM or SIGKILL while its
host probe runs; the reports' cache of a copy of the results damaged (a Parquet part cut
short, a meta.json of the wrong shape) before a report; a line in the middle of that copy
rewritten in place (same size, another time) while a report reads it, and the copy grown
by what the runners appended meanwhile. When the faults are spent or every experiment is recorded, the runners
still going finish, then one last runner per suite and version completes the sweep. Then the
invariants are checked and the figures printed:

- the results file parses (no bad line);
- exactly one line per planned experiment that is not an infrastructure failure (a fork
  server lost: `failure_kind` "infrastructure", which resume runs again; those lines are
  counted, and never follow the experiment's own line): none missing, no duplicate, none
  unplanned;
- no line records an interruption or an infrastructure failure as the experiment's own:
  every builtin and dummy experiment is ok, and every faults experiment failed with its own
  fault's reason (never "killed by SIGKILL");
- every line's metrics are those of its own child (the result.json and spec.json in the
  line's own `artifacts` folder, from the line's own run);
- no process of any runner is left (runners, guards, workers, grandchildren such as the
  `hang` model's: everything started carries this soak's marker variable), no scratch
  folder is left, no claim is left;
- every runner stopped by SIGTERM or SIGINT exited 143 or 130 (0 if it had just finished)
  without a traceback; a runner given a non-UTF-8 argument exited 2, without a traceback;
  a runner killed during its probe took the probe's child with it;
- every line is strict JSON (no NaN) and no line is flagged slower than
  `IMPLAUSIBLE_SLOW_RATIO` times the usual figure (readings from the future never count);
  no ok line's workload signature holds an error (a corrupt cache entry is counted again);
- the lines of the newer schema never stand for this version's experiments (each still
  gets its own line);
- every report exits 0 without a traceback, and the report after an edit of the copy shows
  the edited line's new time.

    python -m benchmarks.stability.soak [--runners 3] [--kills 12] [--batch-sizes 6] [--seed 1]
        [--keep DIR]

With the defaults the plan holds 6 faults, 12 x 6 builtin and 4 x 6 dummy experiments per
version: 204 in all.

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

ROOT = Path(__file__).resolve().parents[2]

import psutil

from core.config import fingerprint_of_line
from core.fields import SCHEMA_VERSION
from core.files.results_file import ResultsFile, read_results

MARKER = "EXPERIMENT_SOAK_MARKER"
COMMON = ["--accelerator=cpu", "--xla=None", "--dynamo=None", "--warmup=0", "--no-progress",
          "--log-level=warning"]
SUITES = {
    "faults": ["--suite-name=faults", "--test=eval", "--repeat=1", "--subprocess-timeout=4",
               "--memory-limit-mb=900"],
    "builtin": ["--suite-name=builtin", "--test=eval", "--test=train", "--precision=fp32",
                "--precision=bf16", "--repeat=2"],
    "dummy": ["--suite-name=dummy", "--test=eval", "--test=train", "--precision=fp32",
              "--precision=bf16", "--repeat=2"],
}
#: The suites whose experiments sweep the batch sizes (more experiments, each as cheap).
BATCHED = ("builtin", "dummy")
#: Each faults model's own failure, as its line must say it.
FAULT_REASONS = {
    "raises": "raised RuntimeError", "segfault": "killed by SIGSEGV",
    "exit": "exited with status 3", "signal": "killed by SIGTERM",
    "hang": "past the timeout", "memory_hog": "over the memory limit",
    "gpu_oom": "raised OutOfMemoryError",
}
STOP_SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT)
#: The faults: a stop signal, a pause (SIGSTOP, then SIGCONT), a fork server killed.
FAULTS = ("SIGKILL", "SIGTERM", "SIGINT", "SIGSTOP", "fork server")
#: The faults of the files and arguments around the runners (`Soak.strike_around`).
SIDE_FAULTS = ("side file", "odd side file", "clock jump", "newer line", "non-UTF-8 argument",
               "SIGTERM in probe", "SIGKILL in probe", "damaged report cache", "edit under report")
#: What `Soak.odd_side_file` puts in a side file's place: a FIFO (a reader that opened it
#: blocking hung for good) or a symbolic link to itself (a loop).
ODD_FILES = ("FIFO", "link loop")
#: How often a fault is one of SIDE_FAULTS.
SIDE_FAULT_SHARE = 0.4
#: The run id of the lines of the newer schema the soak appends.
NEWER_RUN_ID = "newer-version"
#: A slow-period ratio no real slow period of this machine reaches: a line flagged above it
#: was judged against readings that do not belong (from the future).
IMPLAUSIBLE_SLOW_RATIO = 100.0
#: Side files by kind: where they lie under the cache folder (the claims file lies beside
#: the results), and contents that are no JSON or JSON of the wrong shape for that kind.
JUNK = (b"", b"\x00\xff garbage", b"{\"unterminated\": ", b"[1, 2, 3]", b"null", b"{" * 5000,
        b'{"a": NaN}', b'{"a": 1, "a": 2}')
WRONG_SHAPES = {
    "claims": (b'{"f": {"runner": {"run_id": "x", "host": "h", "boot_id": "b", "pid": -1, '
               b'"started": 0}, "claimed_at": 0, "heartbeat": 0}}', b'{"f": 5}'),
    "reference": (b'{"launch_us": 5}', b'{"launch_us": [["a", 1]]}', b'{"launch_us": [[1, 2, 3]]}',
                  b'{"kernel_ms": [[1, "slow"]]}', b'{"host_ms": [[1, NaN]]}'),
    "probe": (b'{"dynamo_backends": "inductor", "torch_version": "2"}', b'{"packages": [1]}',
              b'{"cuda_available": "no"}'),
    "workload": (b'{"key": {}, "workload": 5}', b'{"workload": {"flops_per_iteration": "many"}}'),
}
#: The other version: its default matmul precision (this tree's is "high").
OTHER_DEFAULT = ('default="high", choices=MATMUL_PRECISIONS',
                 'default="highest", choices=MATMUL_PRECISIONS')
VERSIONS = ("this", "other")


@dataclass
class Runner:
    slot: int
    suite: str
    process: subprocess.Popen
    log: Path
    version: str = "this"
    jobs: int = 1
    signal_sent: Optional[int] = None
    started: float = field(default_factory=time.monotonic)
    #: Exit statuses other than a clean one's that this runner may end with.
    expected: Optional[set] = None


@dataclass
class Figures:
    runners: int = 0
    kills: Counter = field(default_factory=Counter)
    kills_mid_experiment: int = 0
    planned: int = 0
    lines: int = 0
    infrastructure_lines: int = 0
    taken_over: int = 0
    runners_by_version: Counter = field(default_factory=Counter)
    runners_with_two_jobs: int = 0
    newer_lines: int = 0
    reports: int = 0
    edits: int = 0
    violations: Counter = field(default_factory=Counter)
    details: list[str] = field(default_factory=list)

    def violation(self, kind: str, detail: str) -> None:
        self.violations[kind] += 1
        if len(self.details) < 30:
            self.details.append(f"{kind}: {detail}")


class Soak:
    def __init__(self, folder: Path, slots: int, kills: int, rng: random.Random,
                 batch_sizes: int = 6) -> None:
        self.folder, self.slots, self.kill_budget, self.rng = folder, slots, kills, rng
        self.batch_sizes = batch_sizes
        self.roots = {"this": ROOT, "other": other_version(folder / "other-version")}
        self.output = folder / "output"
        self.tmp = folder / "tmp"
        self.logs = folder / "logs"
        for made in (self.tmp, self.logs):
            made.mkdir(parents=True, exist_ok=True)
        self.marker = uuid.uuid4().hex
        self.cache = folder / "cache"
        self.environment = dict(os.environ, TMPDIR=str(self.tmp), XDG_CACHE_HOME=str(self.cache),
                                **{MARKER: self.marker})
        self.environment["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
        self.figures = Figures()
        self.newer_lines = 0
        self.turns: dict[str, list[str]] = {}
        self.finished: dict[str, Runner] = {}
        self.timeline: list[str] = []
        self.began = time.monotonic()

    def arguments(self, suite: str) -> list[str]:
        batches = ([f"--batch-size={size}" for size in range(1, self.batch_sizes + 1)]
                   if suite in BATCHED else [])
        return [*COMMON, *SUITES[suite], *batches]

    def command(self, suite: str, version: str = "this", jobs: int = 1) -> list[str]:
        return [sys.executable, str(self.roots[version] / "experiment_runner.py"),
                *self.arguments(suite), f"--jobs={jobs}", f"--output-dirname={self.output}"]

    def start(self, slot: int, suite: str, version: Optional[str] = None,
              jobs: Optional[int] = None, extra: tuple[str, ...] = ()) -> Runner:
        version = version or self.rng.choice(VERSIONS)
        jobs = jobs or self.rng.choice((1, 2))
        self.figures.runners += 1
        self.figures.runners_by_version[version] += 1
        self.figures.runners_with_two_jobs += jobs == 2
        log = self.logs / f"runner-{self.figures.runners:03d}-{suite}-{version}-j{jobs}.log"
        environment = dict(self.environment, PYTHONPATH=os.pathsep.join(
            [str(self.roots[version])] + self.environment["PYTHONPATH"].split(os.pathsep)[1:]))
        with open(log, "wb") as handle:
            process = subprocess.Popen([*self.command(suite, version, jobs), *extra], env=environment,
                                       cwd=str(self.roots[version]), stdout=handle,
                                       stderr=subprocess.STDOUT)
        return Runner(slot, suite, process, log, version, jobs)

    def run(self) -> Figures:
        suites = list(SUITES)
        self.planned = set()
        self.configs: dict[str, list] = {}
        for version in VERSIONS:
            configs = planned_by(self.roots[version], [self.arguments(suite) for suite in suites])
            self.planned |= set(configs)
            self.configs.update(configs)
        running = {slot: self.start(slot, suites[slot % len(suites)]) for slot in range(self.slots)}
        kills = 0
        while kills < self.kill_budget and not self.complete():
            time.sleep(self.rng.uniform(0.3, 2.0))
            for slot, runner in list(running.items()):  # restart those that finished
                if runner.process.poll() is not None:
                    self.finished[runner.log.name] = runner
                    running[slot] = self.start(slot, self.rng.choice(suites))
            if self.rng.random() < SIDE_FAULT_SHARE:
                if self.strike_around(self.next_of("side faults", SIDE_FAULTS), suites):
                    kills += 1
                continue
            slot = self.pick_victim(running)
            victim = running[slot]
            fault = self.rng.choice(FAULTS)
            if victim.process.poll() is None and self.strike(victim, fault):
                kills += 1
            if victim.process.poll() is None and victim.signal_sent is None:
                continue  # paused and resumed, or its fork server killed: it goes on
            victim.process.wait(timeout=180)
            self.finished[victim.log.name] = victim
            running[slot] = self.start(slot, self.rng.choice(suites))
        for runner in running.values():
            runner.process.wait(timeout=1800)
            self.finished[runner.log.name] = runner
        # Complete whatever is left, one runner per suite and version.
        last = [self.start(-1, suite, version, 1) for suite in suites for version in VERSIONS]
        for runner in last:
            runner.process.wait(timeout=1800)
            self.finished[runner.log.name] = runner
        self.check()
        return self.figures

    def strike(self, victim: Runner, fault: str) -> bool:
        """One fault to a running runner; whether it struck (a fork server needs one)."""
        busy = runs_a_child(victim)
        at = f"{time.monotonic() - self.began:6.1f} s"
        where = f"{victim.log.name}{' (running a child)' if busy else ''}"
        if fault == "fork server":
            servers = fork_servers(victim)
            if not servers:
                return False
            server = self.rng.choice(servers)
            try:
                server.kill()
            except psutil.Error:
                return False
            self.timeline.append(f"{at}: SIGKILL to fork server {server.pid} of {where}")
        elif fault == "SIGSTOP":
            victim.process.send_signal(signal.SIGSTOP)
            pause = self.rng.uniform(1.0, 8.0)
            time.sleep(pause)
            victim.process.send_signal(signal.SIGCONT)
            self.timeline.append(f"{at}: SIGSTOP to {where}, SIGCONT {pause:.1f} s later")
        else:
            signum = signal.Signals[fault]
            victim.process.send_signal(signum)
            victim.signal_sent = signum
            self.timeline.append(f"{at}: {fault} to {where}")
        self.figures.kills[fault] += 1
        self.figures.kills_mid_experiment += busy
        return True

    def strike_around(self, fault: str, suites: list[str]) -> bool:
        """One fault to the files or arguments around the runners; whether it struck."""
        at = f"{time.monotonic() - self.began:6.1f} s"
        if fault == "side file":
            struck = self.corrupt_side_file()
        elif fault == "odd side file":
            struck = self.odd_side_file()
        elif fault == "clock jump":
            struck = self.jump_clock()
        elif fault == "newer line":
            struck = self.append_newer_line()
        elif fault == "non-UTF-8 argument":
            struck = self.run_undecodable(self.rng.choice(suites))
        elif fault == "damaged report cache":
            struck = self.damage_report_cache()
        elif fault == "edit under report":
            struck = self.edit_under_report()
        else:
            struck = self.stop_during_probe(self.rng.choice(suites), fault.split()[0])
        if struck:
            self.figures.kills[fault] += 1
            self.timeline.append(f"{at}: {fault}: {struck}")
        return bool(struck)

    def next_of(self, name: str, choices: tuple[str, ...]) -> str:
        """The choices in turn, in an order shuffled anew at each round, so that every kind
        comes up."""
        queue = self.turns.setdefault(name, [])
        if not queue:
            queue.extend(self.rng.sample(choices, len(choices)))
        return queue.pop()

    def side_files(self, kind: str) -> list[Path]:
        root = self.cache / "experiment-runner"
        if kind == "claims":
            claims = self.output / "results.jsonl.claims"
            return [claims] if claims.exists() else []
        folder = {"reference": "reference", "probe": "host", "workload": "workload"}[kind]
        return sorted((root / folder).glob("*.json"))

    def corrupt_side_file(self) -> str:
        """One side file of each kind there is now, overwritten with no JSON or JSON of the
        wrong shape for its kind."""
        struck = []
        for kind in sorted(WRONG_SHAPES):
            found = self.side_files(kind)
            if not found:
                continue
            path = self.rng.choice(found)
            content = self.rng.choice(JUNK + WRONG_SHAPES[kind])
            write_atomically(path, content)
            struck.append(f"{kind} {path.name} <- {content[:30]!r}")
        return "; ".join(struck)

    def odd_side_file(self) -> str:
        """One side file of each kind there is now (the claims file whether or not there is
        one) replaced with a FIFO or a symbolic link that loops."""
        struck = []
        for kind in sorted(WRONG_SHAPES):
            found = self.side_files(kind)
            if kind == "claims" and not found:
                found = [self.output / "results.jsonl.claims"]
            if not found:
                continue
            path = self.rng.choice(found)
            odd = self.rng.choice(ODD_FILES)
            replace_oddly(path, odd)
            struck.append(f"{kind} {path.name} <- {odd}")
        return "; ".join(struck)

    def jump_clock(self) -> str:
        """Readings stamped a month ahead and far below any real one, as a clock set back
        leaves them: used, they would flag every line thousands of times slow."""
        found = self.side_files("reference")
        if not found:
            return ""
        ahead = time.time() + 30 * 24 * 3600
        content = {name: [[ahead + index, 1e-6] for index in range(50)]
                   for name in ("launch_us", "kernel_ms", "host_ms")}
        for path in found:
            write_atomically(path, json.dumps(content).encode())
        return f"{len(found)} reference histories stamped a month ahead"

    def append_newer_line(self) -> str:
        """A newer version's line for an experiment not recorded yet, with an identity
        field this version does not know."""
        recorded = {line.get("fingerprint") for line in read_results(self.output / "results.jsonl").lines}
        waiting = sorted(self.planned - recorded)
        if not waiting:
            return ""
        fingerprint = self.rng.choice(waiting)
        model, experiment = self.configs[fingerprint]
        line = {"schema_version": SCHEMA_VERSION + 1, "model": model,
                "experiment": {**experiment, "sparsity": "2:4"}, "status": "ok",
                "metrics": {"per_iter_time": [0.001, 0.001]}, "summary": {},
                "verification_code": "VERIFIER_SKIPPED", "run_id": NEWER_RUN_ID,
                "fingerprint": f"newer-{fingerprint}", "timestamp": time.time()}
        ResultsFile(self.output / "results.jsonl").append(line)
        self.newer_lines += 1
        return f"a newer line for {fingerprint[:12]}"

    # The reports, over a copy of the results (the invariants hold on the file itself).

    def report_copy(self) -> Path:
        """The copy the reports read, grown by what the runners appended since it was last
        grown (whole lines only), as a results file grows under a report."""
        copy = self.folder / "reports" / "results.jsonl"
        copy.parent.mkdir(parents=True, exist_ok=True)
        try:
            source = (self.output / "results.jsonl").read_bytes()
        except FileNotFoundError:  # no runner has written a line yet
            source = b""
        copy.touch()
        have = copy.stat().st_size
        whole = source[:source.rfind(b"\n") + 1]
        if len(whole) > have:
            with open(copy, "ab") as out:
                out.write(whole[have:])
        return copy

    def report(self, copy: Path, csv: Optional[Path] = None, wait: bool = True):
        """`experiment-runner report` of the copy (its own cache, under the soak's); the
        process, or (waited for) whether it ended well (a violation otherwise)."""
        self.figures.reports += 1
        log = self.logs / f"report-{self.figures.reports:03d}.log"
        command = [sys.executable, str(ROOT / "experiment_runner.py"), "report", str(copy), "--quiet",
                   "--no-history"] + (["--csv", str(csv)] if csv else [])
        handle = open(log, "wb")
        process = subprocess.Popen(command, env=self.environment, cwd=str(ROOT), stdout=handle,
                                   stderr=subprocess.STDOUT)
        handle.close()
        if not wait:
            return process, log
        return self.report_done(process, log)

    def report_done(self, process: subprocess.Popen, log: Path) -> bool:
        code = process.wait(timeout=600)
        text = log.read_text(errors="replace")
        if code != 0 or "Traceback" in text:
            self.figures.violation("report failed", f"{log.name}: exit {code}: {text[-300:]}")
            return False
        return True

    def damage_report_cache(self) -> str:
        """A report of the copy (its cache made), the cache damaged, a report again."""
        copy = self.report_copy()
        if not copy.stat().st_size or not self.report(copy):
            return ""
        folders = [meta.parent for meta in (self.cache / "experiment-runner" / "reports").glob("*/meta.json")]
        if not folders:
            return ""
        folder = self.rng.choice(folders)
        parts = sorted(folder.glob("part-*.parquet"))
        damage = self.rng.choice(("part cut short", "meta.json rows not a number", "meta.json no JSON")
                                 if parts else ("meta.json rows not a number", "meta.json no JSON"))
        if damage == "part cut short":
            part = self.rng.choice(parts)
            part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
        else:
            meta = json.loads((folder / "meta.json").read_text())
            text = json.dumps({**meta, "rows": "many"}) if "rows" in damage else '{"rows": '
            write_atomically(folder / "meta.json", text.encode())
        self.report(copy)
        return damage

    def edit_under_report(self) -> str:
        """A line in the middle of the copy given another time, in place (same size), while
        a report reads the copy; the report after it must show the new time."""
        copy = self.report_copy()
        data = copy.read_bytes()
        if not data:
            return ""
        starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == 10][:-1]
        candidates = []
        for start in starts[len(starts) // 4: 3 * len(starts) // 4 + 1]:
            end = data.index(b"\n", start)
            try:
                line = json.loads(data[start:end])
            except ValueError:
                continue
            if (isinstance(line, dict) and line.get("status") == "ok" and line.get("fingerprint")
                    and isinstance(line.get("metrics"), dict) and line["metrics"].get("per_iter_time")):
                candidates.append((start, end, line))
        # An experiment with one line in the copy (no other line of it to show instead).
        candidates = [c for c in candidates if data.count(b'"fingerprint":"' + c[2]["fingerprint"].encode()) == 1]
        if not candidates:
            return ""
        start, end, line = self.rng.choice(candidates)
        seconds = round(self.rng.uniform(0.5, 0.9), 3)  # no real time of these suites
        line["metrics"]["per_iter_time"] = [seconds] * len(line["metrics"]["per_iter_time"])
        summary = line.get("summary") if isinstance(line.get("summary"), dict) else {}
        summary.pop("processes", None)
        summary["cold_start_entries"] = 0
        line["summary"] = summary
        text = json.dumps(line, separators=(",", ":")).encode()
        for room in ("total_time", "command", "environment"):  # what the figure does not need
            if len(text) <= end - start:
                break
            (line["metrics"] if room == "total_time" else line).pop(room, None)
            text = json.dumps(line, separators=(",", ":")).encode()
        if len(text) > end - start:
            return ""
        reading = self.report(copy, wait=False)  # a report at work while the line changes
        with open(copy, "r+b") as raw:
            raw.seek(start)
            raw.write(text + b" " * (end - start - len(text)))
        self.report_done(*reading)
        if b'"fingerprint":"' + line["fingerprint"].encode() in self.report_copy().read_bytes()[end:]:
            return ""  # a later line of the experiment, appended meanwhile, is the one shown
        csv_path = self.folder / "reports" / "report.csv"
        if not self.report(copy, csv_path):
            return "an edit (the report failed)"
        import csv

        with open(csv_path, newline="") as handle:
            rows = [row for row in csv.DictReader(handle) if row["fingerprint"] == line["fingerprint"][:12]]
        shown = [float(row["median_time_s"]) for row in rows if row["median_time_s"]]
        if shown != [seconds]:
            self.figures.violation("stale report", f"{line['fingerprint'][:12]}: edited to {seconds} s, "
                                                   f"the report shows {shown}")
        self.figures.edits += 1
        return f"{line['fingerprint'][:12]} edited to {seconds} s under a report"

    def run_undecodable(self, suite: str) -> str:
        runner = self.start(-2, suite, extra=("-k", os.fsdecode(b"ml\xffp")))
        runner.process.wait(timeout=120)
        runner.expected = {2}
        self.finished[runner.log.name] = runner
        return runner.log.name

    def stop_during_probe(self, suite: str, name: str) -> str:
        """A runner that probes (--no-probe-cache), stopped while its probe child runs."""
        runner = self.start(-3, suite, extra=("--no-probe-cache",))
        self.finished[runner.log.name] = runner
        deadline, probe = time.monotonic() + 60, None
        while time.monotonic() < deadline and runner.process.poll() is None:
            probe = probe_child(runner)
            if probe is not None and any(self.tmp.glob("experiment-runner-*-probe-*/experiment-runner-isa-*")):
                break
            time.sleep(0.05)
        if probe is None or runner.process.poll() is not None:
            runner.process.kill()
            runner.process.wait(timeout=60)
            runner.signal_sent = signal.SIGKILL
            return ""
        signum = signal.Signals[name]
        runner.process.send_signal(signum)
        runner.signal_sent = signum
        runner.process.wait(timeout=120)
        try:
            probe.wait(timeout=15)
        except psutil.TimeoutExpired:
            self.figures.violation("orphan process", f"the probe child {probe.pid} outlived "
                                   f"{runner.log.name} ({name} during the probe)")
            probe.kill()
        except psutil.Error:
            pass
        return runner.log.name

    def pick_victim(self, running: dict[int, Runner]) -> int:
        """Mostly a runner in the middle of an experiment (waiting a little for one): that
        is where claims, children and lines are at stake; otherwise any runner."""
        if self.rng.random() < 0.9:
            deadline = time.monotonic() + 10
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
        return self.planned <= {line.get("fingerprint") for line in lines
                                if line.get("failure_kind") != "infrastructure"}

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
            expected = runner.expected or {
                None: {0}, signal.SIGKILL: {-signal.SIGKILL, 0}, signal.SIGTERM: {143, 0},
                signal.SIGINT: {130, 0}}[runner.signal_sent]
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
        for folder in [*self.tmp.glob("experiment-runner-*"), *self.tmp.glob("tmp*")]:
            self.figures.violation("scratch folder left", folder.name)
        # A FIFO or a loop there is the soak's own fault, planted after the last runner
        # that looked at claims (a run that finds everything recorded claims nothing).
        if (self.output / "results.jsonl.claims").is_file():
            claims = json.loads((self.output / "results.jsonl.claims").read_text())
            self.figures.violation("claim left", ", ".join(fp[:12] for fp in claims))

    def check_lines(self) -> None:
        planned = self.planned
        self.figures.planned = len(planned)
        read = read_results(self.output / "results.jsonl")
        for bad in read.bad_lines:
            self.figures.violation("unreadable line", f"line {bad.lineno}: {bad.reason}")
        for number, text in enumerate((self.output / "results.jsonl").read_bytes().splitlines(), 1):
            try:
                json.loads(text, parse_constant=refuse_constant)
            except ValueError as error:
                self.figures.violation("unreadable line", f"line {number}: {error}")
        newer = [line for line in read.lines if line.get("run_id") == NEWER_RUN_ID]
        self.figures.newer_lines = len(newer)
        read.lines = [line for line in read.lines if line.get("run_id") != NEWER_RUN_ID]
        self.figures.lines = len(read.lines)
        for line in read.lines:
            verdict = (line.get("summary") or {}).get("slow_period") or {}
            ratio = verdict.get("ratio")
            if isinstance(ratio, (int, float)) and ratio > IMPLAUSIBLE_SLOW_RATIO:
                self.figures.violation("implausible slow period",
                                       f"{line.get('experiment_id')}: {ratio:.0f}x")
        own = [line for line in read.lines if line.get("failure_kind") != "infrastructure"]
        self.figures.infrastructure_lines = len(read.lines) - len(own)
        recorded: set = set()
        for line in read.lines:
            fp = line.get("fingerprint")
            if line.get("failure_kind") == "infrastructure" and fp in recorded:
                self.figures.violation("duplicate", f"{str(fp)[:12]}: an infrastructure "
                                       "failure after its own line")
            elif line.get("failure_kind") != "infrastructure":
                recorded.add(fp)
            problem = wrong_outcome(line)
            if problem:
                self.figures.violation("wrong outcome", f"{line.get('experiment_id')}: {problem}")
        counts = Counter(line.get("fingerprint") for line in own)
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


def wrong_outcome(line: dict) -> Optional[str]:
    """Why the line records something other than its experiment's own outcome, or None:
    builtin and dummy experiments succeed; a faults experiment fails with its own reason; an
    infrastructure failure names its cause."""
    error = str((line.get("metrics") or {}).get("error", ""))
    if line.get("failure_kind") == "infrastructure":
        return None if "fork server" in error else f"an infrastructure failure saying {error[:80]!r}"
    model = (line.get("model") or {}).get("model_name")
    if (line.get("model") or {}).get("suite_name") == "faults":
        # Its own fault, or the short --subprocess-timeout where the machine is slow: the
        # experiment's own outcome either way (never a SIGKILL it did not cause).
        expected = FAULT_REASONS.get(model, "?")
        if line.get("status") != "failed" or (expected not in error
                                              and FAULT_REASONS["hang"] not in error):
            return f"{line.get('status')}, not failed with {expected!r}: {error[:80]!r}"
        return None
    if line.get("status") != "ok":
        return f"{line.get('status')}: {error[:80]!r}"
    workload = line.get("workload")
    if not isinstance(workload, dict) or "error" in workload:
        return f"ok, but its workload signature is {str(workload)[:80]!r}"
    return None


def other_version(folder: Path) -> Path:
    """A copy of this tree whose default matmul precision differs: another version of the
    runner, whose lines share the file with this one's (and never cover them)."""
    shutil.copytree(ROOT, folder, ignore=shutil.ignore_patterns(
        ".git", "output", "__pycache__", ".venv", "*.jsonl*"), dirs_exist_ok=True)
    fields = folder / "core" / "fields.py"
    text = fields.read_text()
    if OTHER_DEFAULT[0] not in text:
        raise SystemExit(f"soak: cannot make the other version ({OTHER_DEFAULT[0]} not found)")
    fields.write_text(text.replace(OTHER_DEFAULT[0], OTHER_DEFAULT[1], 1))
    return folder


def planned_by(root: Path, argument_lists: list[list[str]]) -> dict[str, list]:
    """The experiments the runner at `root` plans for these arguments (in its own process:
    its own defaults): [model, experiment] as its lines write them, by fingerprint."""
    environment = dict(os.environ, PYTHONPATH=str(root))
    answer = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "stability" / "soak.py"), "--print-planned",
         json.dumps(argument_lists)], env=environment, cwd=str(root), capture_output=True,
        text=True, check=True)
    return json.loads(answer.stdout.strip().splitlines()[-1])


def fork_servers(runner: Runner) -> list[psutil.Process]:
    """The runner's fork servers, those with a running child (not a zombie) first."""
    def running_children(server: psutil.Process) -> int:
        try:
            return sum(child.status() != psutil.STATUS_ZOMBIE for child in server.children())
        except psutil.Error:
            return 0

    try:
        servers = [child for child in psutil.Process(runner.process.pid).children()
                   if "runner.run.process.forkserver_server" in " ".join(child.cmdline())]
    except psutil.Error:
        return []
    busy = [server for server in servers if running_children(server)]
    return busy or servers


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
    # The line keeps the requested batch size apart (`batch_size` is the one used).
    experiment = {k: v for k, v in line["experiment"].items()
                  if k not in ("accelerator_model", "requested_batch_size")}
    if "requested_batch_size" in line["experiment"]:
        experiment["batch_size"] = line["experiment"]["requested_batch_size"]
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


def planned_fingerprints(commands: list[list[str]]) -> dict[str, list]:
    from core.config import REQUESTED_BATCH_SIZE
    from api import get_suite
    from api import build_parser, build_plan, matrix_request, probe_host

    host = probe_host()
    planned = {}
    for command in commands:
        args = build_parser().parse_args(command)
        request = matrix_request(args)
        suite = get_suite(args.suite_name, reduced=request.reduced)
        for p in build_plan(suite, request, host).experiments:
            experiment = {**p.experiment.to_dict(), REQUESTED_BATCH_SIZE: p.experiment.batch_size}
            planned[p.fingerprint] = [p.model.to_dict(), experiment]
    return planned


def write_atomically(path: Path, content: bytes) -> None:
    temporary = path.with_name(f".{path.name}.soak")
    temporary.write_bytes(content)
    os.replace(temporary, path)


def replace_oddly(path: Path, odd: str) -> None:
    """Put a FIFO or a symbolic link to itself in `path`'s place, atomically."""
    temporary = path.with_name(f".{path.name}.soak")
    temporary.unlink(missing_ok=True)
    if odd == "FIFO":
        os.mkfifo(temporary)
    else:
        os.symlink(path.name, temporary)
    os.replace(temporary, path)


def refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def probe_child(runner: Runner) -> Optional[psutil.Process]:
    try:
        for child in psutil.Process(runner.process.pid).children():
            if "runner.plan.probe" in " ".join(child.cmdline()):
                return child
    except psutil.Error:
        pass
    return None


def runs_a_child(runner: Runner) -> bool:
    """Whether the runner is running an experiment's child right now: a spawned worker, or a
    child of one of its fork servers."""
    try:
        for child in psutil.Process(runner.process.pid).children():
            command = " ".join(child.cmdline())
            if "child.worker" in command or (
                    "runner.run.process.forkserver_server" in command and any(
                        forked.status() != psutil.STATUS_ZOMBIE for forked in child.children())):
                return True
    except psutil.Error:
        return False
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
    parser.add_argument("--batch-sizes", type=int, default=6,
                        help="builtin and dummy experiments run with batch sizes 1..N")
    parser.add_argument("--print-planned", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.print_planned:  # this tree's plan for other argument lists (planned_by)
        print(json.dumps(planned_fingerprints(json.loads(args.print_planned)), sort_keys=True))
        return 0
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="soak-"))
    start = time.monotonic()
    soak = Soak(folder, args.runners, args.kills, random.Random(seed), args.batch_sizes)
    try:
        figures = soak.run()
    finally:
        for process in marked_processes(soak.marker):  # never leave anything, even on failure
            process.kill()
    kills = ", ".join(f"{name} {count}" for name, count in sorted(figures.kills.items()))
    print(f"soak (seed {seed}): {args.runners} runner slots, {figures.runners} runners started, "
          f"{sum(figures.kills.values())} kills ({kills}; {figures.kills_mid_experiment} while a "
          f"child ran), {figures.planned} planned experiments, "
          f"{figures.lines} lines ({figures.infrastructure_lines} infrastructure failures "
          f"retried), {figures.taken_over} claims taken over, runners by version "
          f"{dict(figures.runners_by_version)}, {figures.runners_with_two_jobs} with --jobs=2, "
          f"{figures.newer_lines} lines of a newer schema, {figures.reports} reports "
          f"({figures.edits} after an edit under a report), "
          f"{time.monotonic() - start:.0f} s")
    total = sum(figures.violations.values())
    kinds = ("missing", "duplicate", "unplanned", "wrong outcome", "foreign metrics",
             "unreadable line", "orphan process", "scratch folder left", "claim left",
             "unclean exit", "implausible slow period", "report failed", "stale report")
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
