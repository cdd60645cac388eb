"""How long `experiment-runner report`, `compare` and `score` take on a large results file.

The file is a year of nightly runs of the dashboard's models, made of lines copied from a
real sweep: `--sample FILE` (a results file), else the benchmark first runs one with the runner
(`SAMPLE_SWEEP`: the builtin suite on the CPU, eager, aot_eager and PJRT, eval and train;
not timed). Each run of the year holds `MODELS` models x `CONFIGURATIONS` lines (2,000 a
night), each a copy of a sample line (round the sample) with its identity varied: the
model (the sample's name with a number), the run id,
the fingerprint and experiment id, the timestamps, and its per-run times scaled per model
and run (a small night-to-night drift); everything else is the real line's text. About
0.5% of the lines are cut short (corrupted). After each night, the reports' cache is
refreshed as the runner refreshes it at the end of a sweep (`runner.run.record.report_cache`);
its cost per night is printed. Generating the file is not timed.

Each command is timed as a whole process, from outside (`python experiment_runner.py
report ...`: Python's start, the imports and the exit included), with its CPU time and peak
memory, `--repeat` times (the median, and the range when repeated):

- no cache (`--no-cache`): every line of the file parsed;
- after the sweeps: the first report once the runner has written the file (its cache,
  refreshed by the runner night after night, holds every line);
- again: the next report;
- and once, the first report of the file with an empty cache (a file copied from another
  machine): it parses every line and fills the cache.

    python -m benchmarks.report_speed [--lines 200000 1000000] [--sample FILE] [--keep DIR]
        [--reuse] [--repeat N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parents[1]

from core.files.results_file import read_results
from api import refresh_report_cache

MODELS = 200
#: Experiments per model and run (2,000 lines a night, as the dashboard's nightly runs).
CONFIGURATIONS = 10
#: The sweep whose lines are copied when no --sample is given (runner flags).
SAMPLE_SWEEP = ["--suite-name=builtin", "--accelerator=cpu", "--xla=None", "--xla=PJRT",
                "--dynamo=None", "--dynamo=aot_eager", "--dynamo=openxla", "--test=eval",
                "--test=train", "--repeat=10", "--no-progress", "--log-level=warning"]
#: Placeholders put into a sample line's text where each copy differs.
_MODEL, _RUN, _FINGERPRINT, _START, _END, _TIMES = (
    "@@model@@", "@@run@@", "@@fingerprint@@", "@@start@@", "@@end@@", "@@times@@")


def sample_lines(path: Path) -> list[dict]:
    """The usable lines of a real results file (one per experiment: the latest)."""
    latest: dict[str, dict] = {}
    for line in read_results(path).lines:
        if isinstance(line.get("model"), dict):
            latest[line.get("fingerprint") or str(len(latest))] = line
    if not latest:
        raise SystemExit(f"no results line in {path}")
    return list(latest.values())


def run_sample_sweep(folder: Path) -> Path:
    """A real sweep's results file, made by the runner (`SAMPLE_SWEEP`)."""
    out = folder / "sample"
    done = subprocess.run([sys.executable, str(ROOT / "experiment_runner.py"), *SAMPLE_SWEEP,
                           f"--output-dirname={out}"], capture_output=True, text=True, cwd=ROOT)
    if done.returncode not in (0, 1) or not (out / "results.jsonl").exists():
        raise SystemExit(f"the sample sweep failed:\n{done.stderr[-2000:]}")
    return out / "results.jsonl"


def template(line: dict) -> tuple[str, list]:
    """The line's compact text with placeholders where copies differ, and its per-run times."""
    line = json.loads(json.dumps(line))
    model = line["model"]
    name = model.get("model_name", "model")
    model["model_name"] = f"{name}_{_MODEL}"
    if isinstance(line.get("experiment_id"), str):
        line["experiment_id"] = line["experiment_id"].replace(name, f"{name}_{_MODEL}", 1)
    line["fingerprint"], line["run_id"] = _FINGERPRINT, _RUN
    line["timestamp"], line["finished_at"] = _START, _END
    metrics = line.get("metrics") if isinstance(line.get("metrics"), dict) else {}
    times = metrics.get("per_iter_time") if isinstance(metrics.get("per_iter_time"), list) else []
    for key in ("per_iter_time", "total_time"):
        if isinstance(metrics.get(key), list) and metrics[key] == times:
            metrics[key] = _TIMES
    text = json.dumps(line, separators=(",", ":"))
    for placeholder in (_START, _END, _TIMES):
        text = text.replace(f'"{placeholder}"', placeholder)
    return text, times


def copy_of(text: str, times: list, model: int, run: int, rng: random.Random) -> str:
    factor = random.Random(model).uniform(0.3, 3.0) * (1.0 + 0.02 * ((run * 7 + model) % 5 - 2) / 2)
    scaled = ",".join(repr(t * factor * rng.uniform(0.97, 1.03)) if isinstance(t, (int, float))
                      else "null" for t in times)
    start = 1.7e9 + run * 86400 + model * 60
    fingerprint = hashlib.sha256(f"{text[:200]}{model}".encode()).hexdigest()
    return (text.replace(_MODEL, f"{model:03d}").replace(_RUN, f"night-{run:04d}")
            .replace(_FINGERPRINT, fingerprint).replace(_START, repr(start))
            .replace(_END, repr(start + 40.0)).replace(_TIMES, f"[{scaled}]"))


def generate(path: Path, lines: int, sample: list[dict], seed: int = 0,
             after_night: Optional[Callable[[], None]] = None) -> int:
    """`lines` lines (whole runs of MODELS x CONFIGURATIONS lines: model m's configuration c
    is a copy of sample line m * CONFIGURATIONS + c, round the sample), `after_night` called
    once each run is written (as the runner ends a sweep); returns the number of runs."""
    rng = random.Random(seed)
    templates = [template(line) for line in sample]
    runs = max(2, -(-lines // (MODELS * CONFIGURATIONS)))
    written = 0
    for run in range(runs):
        with open(path, "w" if run == 0 else "a", encoding="utf-8") as out:
            for model in range(MODELS):
                for configuration in range(CONFIGURATIONS):
                    if written >= lines:
                        break
                    written += 1
                    text, times = templates[(model * CONFIGURATIONS + configuration) % len(templates)]
                    copy = copy_of(text, times, model, run, rng)
                    if rng.random() < 0.005:
                        copy = copy[:len(copy) // 3]
                    out.write(copy + "\n")
        if after_night is not None:
            after_night()
        if written >= lines:
            break
    return runs


@dataclass
class Timing:
    """One command's runs: wall seconds, CPU seconds (user + system) and peak RSS (MiB)."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    codes: set[int] = field(default_factory=set)

    def cell(self) -> str:
        wall = statistics.median(self.wall)
        spread = f" ({min(self.wall):.2f}-{max(self.wall):.2f})" if len(self.wall) > 1 else ""
        codes = "" if self.codes <= {0, 1} else f" exit {sorted(self.codes)}"
        return (f"{wall:.2f} s{spread}, cpu {statistics.median(self.cpu):.2f} s, "
                f"{max(self.rss):.0f} MiB{codes}")


#: Runs the command of its arguments (from the third on) and writes its wall, CPU and peak
#: RSS as JSON to the file of its first: a small fresh process, because Linux counts the
#: memory of the process that forks a child, up to the child's exec, in the child's peak RSS,
#: and this benchmark's own (its cache refreshed over a year of lines) would be the floor of
#: every figure. Its second argument is the command's output file.
MEASURE = """
import json, os, subprocess, sys, time
with open(sys.argv[2], "wb") as sink:
    start = time.perf_counter()
    child = subprocess.Popen(sys.argv[3:], stdout=sink, stderr=sink, stdin=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
with open(sys.argv[1], "w") as out:
    json.dump({"wall": wall, "code": os.waitstatus_to_exitcode(status),
               "cpu": usage.ru_utime + usage.ru_stime, "rss_kib": usage.ru_maxrss}, out)
"""


def run_command(argv: list[str], timing: Timing) -> Timing:
    """Run `python experiment_runner.py ARGV` once, timed from outside (from a small process
    of its own: MEASURE)."""
    with tempfile.TemporaryDirectory() as folder:
        figures, output = Path(folder) / "figures.json", Path(folder) / "output"
        subprocess.run([sys.executable, "-c", MEASURE, str(figures), str(output),
                        sys.executable, str(ROOT / "experiment_runner.py"), *argv],
                       check=True, cwd=ROOT, stdin=subprocess.DEVNULL)
        measured = json.loads(figures.read_text())
        timing.wall.append(measured["wall"])
        timing.cpu.append(measured["cpu"])
        timing.rss.append(measured["rss_kib"] / 1024)
        timing.codes.add(measured["code"])
        if measured["code"] not in (0, 1):
            print(f"  {' '.join(argv[:2])}: exit {measured['code']}: "
                  f"{output.read_bytes()[-1000:].decode(errors='replace')}")
    return timing


def machine_state() -> str:
    load1, load5, _ = os.getloadavg()
    busy = []
    try:
        done = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"], capture_output=True, text=True, timeout=5)
        for row in done.stdout.splitlines()[1:6]:
            cpu, name = row.split(None, 1)
            if float(cpu) >= 20:
                busy.append(f"{name.strip()} {cpu}%")
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    return (f"{os.cpu_count()} cores, load average {load1:.2f} (1 min) {load5:.2f} (5 min)"
            + (f"; busy: {', '.join(busy)}" if busy else ""))


def bench(lines: int, folder: Path, sample: list[dict], reuse: bool = False, repeat: int = 1) -> None:
    path = folder / f"results-{lines}.jsonl"
    cache = folder / f"cache-{lines}"
    start = time.perf_counter()
    runs = max(2, -(-lines // (MODELS * CONFIGURATIONS)))
    refreshes: list[float] = []

    def runner_refresh() -> None:  # what the runner does once a sweep's lines are appended
        began = time.perf_counter()
        if refresh_report_cache(path, cache):
            refreshes.append(time.perf_counter() - began)

    if reuse and path.exists():
        made = "reused"
        runner_refresh()
    else:
        shutil.rmtree(cache, ignore_errors=True)
        runs = generate(path, lines, sample, after_night=runner_refresh)
        made = f"generated in {time.perf_counter() - start:.0f} s, not timed"
    size = path.stat().st_size
    print(f"\n== {lines:,} lines: {runs} runs x {MODELS} models x {CONFIGURATIONS} configurations "
          f"({size / 2**20:.0f} MiB, {size / lines / 1000:.1f} KB a line; {made})")
    if made == "reused" and refreshes:
        print(f"the runner's refresh of the cache, nothing new to parse: {refreshes[0]:.2f} s")
    elif refreshes:
        print(f"the runner's refresh of the cache after a night: median {statistics.median(refreshes):.2f} s, "
              f"longest {max(refreshes):.2f} s ({len(refreshes)} nights; the first ones, under 32 MiB, are left alone)")
    print(f"machine: {machine_state()}")
    first, last = "night-0000", f"night-{runs - 1:04d}"
    out = folder / f"report-{lines}"
    commands = {
        "report (all outputs)": ["report", str(path), "--output-dir", str(out), "--quiet"],
        f"compare {first} vs {last}": ["compare", str(path), str(path), "--base-run", first, "--new-run", last],
        f"score vs {first}": ["score", str(path), "--reference", str(path), "--reference-run", first],
    }
    columns = ("no cache (--no-cache)", "after the sweeps", "again")
    results: dict[str, list[Timing]] = {label: [Timing() for _ in columns] for label in commands}
    for _ in range(repeat):  # A B C A B C ...: the machine's drift hits every cell alike
        for label, argv in commands.items():
            cells = results[label]
            run_command(argv + ["--no-cache"], cells[0])
            run_command(argv + ["--cache-dir", str(cache)], cells[1])
            run_command(argv + ["--cache-dir", str(cache)], cells[2])
    width = 44
    print(f"{'command (median of ' + str(repeat) + ')':<30} " + " ".join(f"{c:<{width}}" for c in columns))
    for label, cells in results.items():
        print(f"{label:<30} " + " ".join(f"{cell.cell():<{width}}" for cell in cells))
    empty = folder / f"cache-{lines}-empty"
    shutil.rmtree(empty, ignore_errors=True)
    filling = run_command(["report", str(path), "--html", str(out / "fill.html"), "--quiet",
                           "--cache-dir", str(empty)], Timing())
    shutil.rmtree(empty, ignore_errors=True)
    print(f"{'report, empty cache (fills it)':<30} {filling.cell()}")
    print(f"machine after: {machine_state()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--sample", type=Path, default=None,
                        help="a real results file whose lines are copied (default: run SAMPLE_SWEEP)")
    parser.add_argument("--keep", type=Path, default=None, help="write files here instead of a temporary folder")
    parser.add_argument("--reuse", action="store_true", help="with --keep: reuse results files generated before")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command (the median is printed)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = args.keep or Path(temp)
        folder.mkdir(parents=True, exist_ok=True)
        source = args.sample or run_sample_sweep(folder)
        sample = sample_lines(source)
        print(f"sample: {len(sample)} lines of a real sweep, "
              f"{sum(len(json.dumps(line, separators=(',', ':'))) for line in sample) / len(sample) / 1000:.1f} KB each")
        for lines in args.lines:
            bench(lines, folder, sample, args.reuse, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
