"""Run the runner as a user would, timed from outside, and read the lines it wrote (shared
by the benchmarks that time whole sweeps: overhead.py, stability.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

from core.files.results_file import read_results


def timed_sweep(runner_args: list[str], folder: Path, what: str = "") -> tuple[float, list[dict[str, Any]]]:
    """`experiment_runner.py RUNNER_ARGS` writing into `folder`: its wall time and its lines;
    a failed sweep ends the benchmark with the runner's last words."""
    command = [sys.executable, str(ROOT / "experiment_runner.py"), *runner_args, "--no-progress",
               f"--output-dirname={folder}", "--log-level=warning"]
    start = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, cwd=str(ROOT))
    wall = time.perf_counter() - start
    if completed.returncode != 0:
        label = f" ({what})" if what else ""
        raise SystemExit(f"the sweep failed{label}:\n{completed.stderr[-2000:]}")
    return wall, read_results(folder / "results.jsonl").lines
