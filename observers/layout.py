"""Where observability files go inside a timing child's folder (parent-safe, no torch).

    <child folder>/run-<i>/      one folder per timed run, for files written per run
    <child folder>/hlo/          XLA's own dump (--dump-hlo)
    <child folder>/ir/           the IR of the experiment's graphs (--save-ir-format)
    <child folder>/xla-profile/  XLA's profiler trace, XPlane for TensorBoard (--profile-xla)
"""

from __future__ import annotations

from pathlib import Path

RUN_DIR_PREFIX = "run-"
HLO_DIR = "hlo"
IR_DIR = "ir"
DYNAMO_COUNTERS_FILE = "dynamo_counters.json"
CHROME_TRACE_FILE = "trace.json"
PROFILE_TABLE_FILE = "profile.txt"
XLA_METRICS_FILE = "xla_metrics.txt"
XLA_PROFILE_DIR = "xla-profile"
OUTPUT_FILE = "output.pt"


def run_dir(experiment_dir: Path, index: int) -> Path:
    """The folder of timed run `index` (0-based), created on demand."""
    directory = Path(experiment_dir) / f"{RUN_DIR_PREFIX}{index}"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def ir_file_stem(ir_format: str) -> str:
    """Base name of the IR file of one format, e.g. 'graphs.stablehlo.txt'."""
    return f"graphs.{ir_format}.txt"
