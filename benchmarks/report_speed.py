"""How long `report`, `compare` and `score` take on a large results file, and their memory.

The file is a year of nightly runs of the dashboard's models, made of lines copied from a
real sweep: `--sample FILE` (a results file), else the benchmark first runs one with the runner
(`SAMPLE_SWEEP`: the builtin suite on the CPU, eager, aot_eager and PJRT, eval and train;
not timed). Each run of the year holds `MODELS` models x `CONFIGURATIONS` lines (2,000 a
night), each a copy of a sample line (round the sample) with its identity varied: the
model (the sample's name with a number), the run id,
the fingerprint and experiment id, the timestamps, and its per-run times scaled per model
and run (a small night-to-night drift); everything else is the real line's text. About
0.5% of the lines are cut short (corrupted).

Each command runs in a fresh Python process (its peak RSS is the process's own), twice:
cold (--no-cache: every line parsed) and warm (the cache filled by the first cold report:
nothing parsed again). Generating the file is not timed.

    python benchmarks/report_speed.py [--lines 200000 1000000] [--sample FILE] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.results_file import read_results  # noqa: E402

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


def generate(path: Path, lines: int, sample: list[dict], seed: int = 0) -> int:
    """`lines` lines (whole runs of MODELS x CONFIGURATIONS lines: model m's configuration c
    is a copy of sample line m * CONFIGURATIONS + c, round the sample); returns the number of
    runs."""
    rng = random.Random(seed)
    templates = [template(line) for line in sample]
    runs = max(2, -(-lines // (MODELS * CONFIGURATIONS)))
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        for run in range(runs):
            for model in range(MODELS):
                for configuration in range(CONFIGURATIONS):
                    if written >= lines:
                        return runs
                    written += 1
                    text, times = templates[(model * CONFIGURATIONS + configuration) % len(templates)]
                    copy = copy_of(text, times, model, run, rng)
                    if rng.random() < 0.005:
                        copy = copy[:len(copy) // 3]
                    out.write(copy + "\n")
    return runs


_CHILD = """
import resource, sys, time, io, contextlib
sys.path.insert(0, {root!r})
from reports.cli import main
sink = io.StringIO()
start = time.perf_counter()
with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
    code = main({argv!r})
elapsed = time.perf_counter() - start
print(elapsed, code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""

_LOAD_CHILD = """
import resource, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from reports.read.load import load
start = time.perf_counter()
cache = {cache!r}
loaded = load([Path({path!r})], cache_dir=Path(cache) if cache else None)
elapsed = time.perf_counter() - start
print(elapsed, len(loaded.records), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
      len(loaded.bad_lines), len(loaded.runs))
"""


def _child(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(done.stdout + done.stderr)
    return done.stdout.split("\n")[-2].split()


def _command(argv: list[str]) -> tuple[float, int, float]:
    elapsed, code, rss = _child(_CHILD.format(root=str(ROOT), argv=argv))
    return float(elapsed), int(code), float(rss)


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


def bench(lines: int, folder: Path, sample: list[dict], reuse: bool = False) -> None:
    path = folder / f"results-{lines}.jsonl"
    cache = folder / f"cache-{lines}"
    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    runs = max(2, -(-lines // (MODELS * CONFIGURATIONS)))
    if reuse and path.exists():
        made = "reused"
    else:
        runs = generate(path, lines, sample)
        made = f"generated in {time.perf_counter() - start:.0f} s, not timed"
    size = path.stat().st_size
    print(f"\n== {lines:,} lines: {runs} runs x {MODELS} models x {CONFIGURATIONS} configurations "
          f"({size / 2**20:.0f} MiB, {size / lines / 1000:.1f} KB a line; {made})")
    print(f"machine: {machine_state()}")
    first, last = "night-0000", f"night-{runs - 1:04d}"
    out = folder / f"report-{lines}"
    commands = {
        "report (all outputs)": ["report", str(path), "--output-dir", str(out), "--quiet"],
        f"compare {first} vs {last}": ["compare", str(path), str(path), "--base-run", first, "--new-run", last],
        f"score vs {first}": ["score", str(path), "--reference", str(path), "--reference-run", first],
    }
    print(f"{'step':<34} {'cold (no cache)':>22} {'warm (cached)':>22}")
    # The first report of a new file fills the cache (paid once; later ones parse only
    # what was appended).
    elapsed, code, rss = _command(["report", str(path), "--html", str(out / "fill.html"),
                                   "--quiet", "--cache-dir", str(cache)])
    print(f"{'first report, filling the cache':<34} {elapsed:>9.2f} s {rss:>7.0f} MiB")
    results: dict[str, list[str]] = {}
    elapsed, records, rss, bad, nruns = _child(_LOAD_CHILD.format(root=str(ROOT), path=str(path), cache=""))
    results["load (latest line per experiment)"] = [f"{float(elapsed):>9.2f} s {float(rss):>7.0f} MiB"]
    elapsed, _, rss, _, _ = _child(_LOAD_CHILD.format(root=str(ROOT), path=str(path), cache=str(cache)))
    results["load (latest line per experiment)"].append(f"{float(elapsed):>9.2f} s {float(rss):>7.0f} MiB")
    for label, argv in commands.items():
        cells = []
        for options in (["--no-cache"], ["--cache-dir", str(cache)]):
            elapsed, code, rss = _command(argv + options)
            cells.append(f"{elapsed:>9.2f} s {rss:>7.0f} MiB" + ("" if code in (0, 1) else f" exit {code}"))
        results[label] = cells
    for label, cells in results.items():
        print(f"{label:<34} {cells[0]:>22} {cells[1]:>22}")
    print(f"experiments {records}, runs {nruns}, corrupted lines reported {bad}")
    print(f"machine after: {machine_state()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--sample", type=Path, default=None,
                        help="a real results file whose lines are copied (default: run SAMPLE_SWEEP)")
    parser.add_argument("--keep", type=Path, default=None, help="write files here instead of a temporary folder")
    parser.add_argument("--reuse", action="store_true", help="with --keep: reuse results files generated before")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = args.keep or Path(temp)
        folder.mkdir(parents=True, exist_ok=True)
        source = args.sample or run_sample_sweep(folder)
        sample = sample_lines(source)
        print(f"sample: {len(sample)} lines of a real sweep, "
              f"{sum(len(json.dumps(line, separators=(',', ':'))) for line in sample) / len(sample) / 1000:.1f} KB each")
        for lines in args.lines:
            bench(lines, folder, sample, args.reuse)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
