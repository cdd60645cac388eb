"""What the parsed flags ask of a sweep, typed: what to run, where its output goes and how it
is controlled, and how many experiments run at a time and where. With the how-to-measure
settings (core.config.RunSettings) they are all the app reads of the flags
(runner/plan/parser.py: `sweep_flags`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from runner.plan.matrix import MatrixRequest


@dataclass(frozen=True)
class SingleExperiment:
    """--model-config and --experiment-config: exactly one experiment, as JSON."""

    model_config: str
    experiment_config: str


@dataclass(frozen=True)
class WhatToRun:
    """The suite, the matrix asked for, or the one experiment."""

    suite_name: str
    request: MatrixRequest
    single: Optional[SingleExperiment] = None
    #: Run models the suite marks as unable to run a test (--no-skip).
    no_skip: bool = False


@dataclass(frozen=True)
class OutputOptions:
    """Where the results go and how the sweep is controlled."""

    dirname: str = "./output"
    basename: str = "results.jsonl"
    #: Keep the lines already recorded and run only the others (not --no-resume).
    resume: bool = True
    dry_run: bool = False
    progress: bool = True
    #: Every line's timestamp (--timestamp); None: when the sweep starts.
    timestamp: Optional[float] = None
    log_level: str = "info"
    #: Use a cached answer of the host probe (not --no-probe-cache).
    probe_cache: bool = True
    print_subprocess: bool = False
    subprocess_timeout: float = 1800.0
    #: The memory a child may use; 0: 90% of the machine over the experiments run at a time.
    memory_limit_bytes: int = 0


@dataclass(frozen=True)
class ScaleOptions:
    """How many experiments run at a time, and where: this machine's slots, or Ray."""

    jobs: int = 1
    devices: tuple[str, ...] = ()
    #: Experiments that share each GPU, taking turns on the card (child/device_gate.py);
    #: None: as many as `runner.plan.slots.auto_per_gpu` chooses.
    per_gpu: Optional[int] = None
    start_method: str = "forkserver"
    #: The folder of the fork servers' templates that outlive the run (--server-pool), None
    #: for servers of the run's own.
    server_pool: Optional[str] = None
    executor: str = "local"
    ray_address: Optional[str] = None
    ray_cpus_per_task: Optional[float] = None
    ray_tasks: Optional[int] = None
    retries: int = 0

