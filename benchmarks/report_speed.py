"""How long `report`, `compare` and `score` take on a large results file, and their memory.

The file is a year of nightly runs of the dashboard's models: 200
models x 10 configurations (eval and train; eager, inductor, inductor with cudagraphs,
aot_eager, PJRT+openxla) per run, as many runs as the line count asks (50 for 100,000
lines, 500 for 1,000,000). Lines are made by the runner's own builder
(core.schema.ResultLine) with a realistic environment, command, verification details and
dynamo counters; the older half of the runs has the old layout (figures in `metrics`), the
newer half the current one (figures in `summary`, `finished_at`, `experiment.mode`, paired
speedups, a contention flag). About 3% of the lines failed, 2% were skipped, 0.5% are cut
short (corrupted), and a run in five was not verified.

Each command runs in a fresh Python process (its peak RSS is the process's own), twice:
cold (--no-cache: every line parsed) and warm (the cache filled by the first cold report:
nothing parsed again). Generating the file is not timed.

    python benchmarks/report_speed.py [--lines 100000 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
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

from core.config import ExperimentConfig, ModelConfig, RunSettings  # noqa: E402
from core.schema import ResultLine, Status, VerificationCode  # noqa: E402

MODELS = 200
STACKS = [
    ("eager", dict(xla=None, dynamo=None, torch_xla2=None), None),
    ("inductor", dict(xla=None, dynamo="inductor", torch_xla2=None), "default"),
    ("inductor", dict(xla=None, dynamo="inductor", torch_xla2=None), "cudagraphs"),
    ("aot_eager", dict(xla=None, dynamo="aot_eager", torch_xla2=None), None),
    ("PJRT+openxla", dict(xla="PJRT", dynamo="openxla", torch_xla2=None), None),
]
CONFIGS = [(label, ExperimentConfig(accelerator="cuda", test=test, precision="bf16", **stack), mode)
           for test in ("eval", "train") for label, stack, mode in STACKS]
SUITES = ("torchbench", "huggingface", "timm")
ENVIRONMENT = {
    "python": "3.11.7", "platform": "Linux-6.8.0-x86_64-with-glibc2.36", "host": "gpu-node-07",
    "cpu_count": 12,
    "packages": {"torch": "2.9.0", "torchvision": "0.24.0", "torch_xla": "2.9.0", "triton": "3.5.0",
                 "timm": "1.0.31", "transformers": "5.24.0", "numpy": "2.4.6"},
    "torch_settings": {"float32_matmul_precision": "high", "cuda_matmul_allow_tf32": True,
                       "cudnn_allow_tf32": True, "num_threads": 12},
}
COMMAND = ("experiment-runner --suite-name=torchbench --accelerator=cuda --xla=None --xla=PJRT "
           "--dynamo=None --dynamo=inductor --dynamo=aot_eager --dynamo=openxla --test=eval "
           "--test=train --precision=bf16 --repeat=10 --verify --collect-dynamo-counters")


def _line(rng: random.Random, run: int, runs: int, m: int, c: int) -> dict:
    label, experiment, mode = CONFIGS[c]
    suite = SUITES[m % len(SUITES)]
    model = ModelConfig(suite, f"model_{m:03d}")
    new_layout = run >= runs // 2
    verified = run % 5 != 3  # the latest run is verified
    base = random.Random(m).uniform(0.002, 0.2) * (1.0 if experiment.test == "eval" else 3.0)
    factor = {"eager": 1.0, "inductor": 0.55 if mode == "default" else 0.45, "aot_eager": 0.95,
              "PJRT+openxla": 0.7}[label]
    drift = 1.0 + 0.02 * ((run * 7 + m) % 5 - 2) / 2  # small night-to-night drift
    roll = rng.random()
    status = Status.OK
    if label != "eager" and roll < 0.03:
        status = Status.FAILED
    elif roll > 0.98:
        status = Status.SKIPPED
    times = [base * factor * drift * rng.uniform(0.97, 1.03) for _ in range(10)]
    figures = {"cold_start_time": base * 5 + (8.0 if label != "eager" else 0.0),
               "peak_device_memory_bytes": int(2**30 * random.Random(m * 31 + c).uniform(0.5, 4)),
               "peak_host_memory_bytes": int(2**30 * rng.uniform(2, 3)), "wall_time": 40.0}
    if label not in ("eager", "PJRT+openxla"):
        figures.update({"dynamo_graph_count": 1, "dynamo_unique_graphs": 1 + m % 3,
                        "dynamo_graph_breaks": m % 3, "dynamo_graph_break_reasons": {f"reason {i}": 1 for i in range(m % 3)}})
    if status is Status.FAILED:
        metrics, figures = {"error": "Traceback (most recent call last):\n...\nRuntimeError: synthetic failure"}, {}
    elif status is Status.SKIPPED:
        metrics, figures = {"error": "SKIP"} if new_layout else {}, {}
    else:
        metrics = {"total_time": times, "per_iter_time": times}
    code = VerificationCode.VERIFIER_SKIPPED
    if verified and status is Status.OK:
        code = VerificationCode.FAIL if rng.random() < 0.01 else VerificationCode.PASS
    elif verified and status is Status.FAILED:
        code = VerificationCode.VERIFIER_DIDNT_RUN
    line = ResultLine(
        model, experiment, RunSettings(repeat=10, verify=verified), status, code, metrics=metrics,
        stack_label=label, accelerator_model="NVIDIA A100-SXM4-40GB", run_id=f"night-{run:04d}",
        experiment_id=f"{suite}-{model.model_name}-cuda-{label}-{experiment.test}-bf16",
        command=COMMAND, environment=ENVIRONMENT, batch_size_used=8 + m % 4 * 8,
        skip_reason="not supported on this stack" if status is Status.SKIPPED else None,
        verification_details={"method": "fp64", "worst_ratio": 0.01, "error": 1e-7} if code is VerificationCode.PASS else None,
        artifacts={"time": f"{model.model_name}/night-{run:04d}/time"},
    ).to_dict()
    start = 1.7e9 + run * 86400
    if new_layout:
        line["summary"] = figures
        if mode:
            line["experiment"]["mode"] = mode
        line["experiment"]["batch_size"] = line.pop("batch_size_used", None)
        line["timestamp"], line["finished_at"] = start, start + m * 60 + c
        if label != "eager" and status is Status.OK:
            line["summary"]["paired_speedup"] = {"method": "paired", "speedup": 1 / factor, "p_value": 0.001}
            line["summary"]["unreliable"] = rng.random() < 0.01
    else:
        line["metrics"].update(figures)
        if mode and mode != "default":
            line["experiment"]["mode"] = mode
        line["timestamp"] = start + m * 60 + c
    return line


def generate(path: Path, lines: int, seed: int = 0) -> int:
    """`lines` lines (whole runs of 2,000 lines); returns the number of runs."""
    rng = random.Random(seed)
    per_run = MODELS * len(CONFIGS)
    runs = max(2, lines // per_run)
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        for run in range(runs):
            for m in range(MODELS):
                for c in range(len(CONFIGS)):
                    if written >= lines:
                        return runs
                    written += 1
                    if rng.random() < 0.005:
                        out.write('{"model": {"suite_name": "timm", "model_name": "model_0\n')
                        continue
                    out.write(json.dumps(_line(rng, run, runs, m, c), separators=(",", ":")) + "\n")
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


def bench(lines: int, folder: Path, reuse: bool = False) -> None:
    path = folder / f"results-{lines}.jsonl"
    cache = folder / f"cache-{lines}"
    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    if reuse and path.exists():
        runs = max(2, lines // (MODELS * len(CONFIGS)))
        made = "reused"
    else:
        runs = generate(path, lines)
        made = f"generated in {time.perf_counter() - start:.0f} s, not timed"
    print(f"\n== {lines:,} lines: {runs} runs x {MODELS} models x {len(CONFIGS)} configurations "
          f"({path.stat().st_size / 2**20:.0f} MiB; {made})")
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
    parser.add_argument("--lines", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--keep", type=Path, default=None, help="write files here instead of a temporary folder")
    parser.add_argument("--reuse", action="store_true", help="with --keep: reuse results files generated before")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        folder = args.keep or Path(temp)
        folder.mkdir(parents=True, exist_ok=True)
        for lines in args.lines:
            bench(lines, folder, args.reuse)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
