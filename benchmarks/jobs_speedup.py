"""The same sweep with --jobs=1 and --jobs=N, one after the other: wall-time speedup, and
whether the results agree otherwise.

Every flag after `--` goes to both sweeps (each into its own output folder). The script
prints each sweep's wall time, the speedup, and per experiment the status and median time
per iteration of both, their ratio and the geometric mean of the ratios.

    python -m benchmarks.jobs_speedup --jobs 2 --out DIR -- --accelerator=cuda ...
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from core.figures import median_time


def sweep(folder: Path, jobs: int, flags: list[str]) -> float:
    command = [sys.executable, str(ROOT / "experiment_runner.py"), f"--jobs={jobs}",
               f"--output-dirname={folder}", "--no-progress", *flags]
    start = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, cwd=str(ROOT))
    wall = time.perf_counter() - start
    (folder / "runner.log").write_text(completed.stdout + completed.stderr)
    if completed.returncode != 0:
        raise SystemExit(f"the sweep with --jobs={jobs} failed:\n{completed.stderr[-3000:]}")
    return wall


def lines_by_fingerprint(folder: Path) -> dict[str, dict]:
    lines = [json.loads(text) for text in (folder / "results.jsonl").read_text().splitlines() if text]
    return {line["fingerprint"]: line for line in lines}


def median_ms(line: dict) -> float | None:
    seconds = median_time(line)
    return seconds * 1e3 if seconds is not None else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("flags", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    flags = [flag for flag in args.flags if flag != "--"]
    one, many = args.out / "jobs-1", args.out / f"jobs-{args.jobs}"
    wall_one = sweep(one, 1, flags)
    wall_many = sweep(many, args.jobs, flags)
    first, second = lines_by_fingerprint(one), lines_by_fingerprint(many)
    print(f"--jobs=1: {len(first)} experiments in {wall_one:.1f} s; --jobs={args.jobs}: "
          f"{len(second)} in {wall_many:.1f} s; speedup {wall_one / wall_many:.2f}x "
          f"({wall_one / wall_many / args.jobs:.2f} x the job count)")
    if set(first) != set(second):
        print(f"the experiments differ: {len(set(first) ^ set(second))} only in one sweep")
    print(f"{'model':<20} {'stack':<12} {'test':<6} {'prec':<5} {'status 1/N':<12} "
          f"{'median 1':>10} {'median N':>10} {'N/1':>6} {'device N'}")
    ratios = []
    for fingerprint, line in sorted(first.items(), key=lambda item: item[1]["experiment_id"]):
        other = second.get(fingerprint, {})
        a, b = median_ms(line), median_ms(other) if other else None
        ratio = b / a if a and b else None
        if ratio:
            ratios.append(ratio)
        experiment = line["experiment"]
        device = ((other.get("environment") or {}).get("variables") or {}).get("CUDA_VISIBLE_DEVICES", "-")
        print(f"{line['model']['model_name']:<20} {line.get('stack_label', '?'):<12} "
              f"{experiment['test']:<6} {experiment['precision']:<5} "
              f"{line['status'] + '/' + other.get('status', '-'):<12} "
              f"{a or float('nan'):>9.3f}ms {b or float('nan'):>9.3f}ms "
              f"{ratio or float('nan'):>6.3f} {device}")
    if ratios:
        geomean = math.exp(statistics.fmean(math.log(ratio) for ratio in ratios))
        print(f"geometric mean of median-time ratios (N/1): {geomean:.3f} over {len(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
