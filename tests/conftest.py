"""Shared fixtures: run the real CLI in a child process and read what it wrote."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.results_file import read_results

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class CliRun:
    returncode: int
    stdout: str
    stderr: str
    output_dir: Path

    @property
    def results_path(self) -> Path:
        return self.output_dir / "results.jsonl"

    def lines(self) -> list[dict[str, Any]]:
        return read_results(self.results_path).lines


def pytest_configure(config) -> None:
    """pytest-xdist's workers ignore SIGINT, and a child inherits an ignored SIGINT (as a
    shell's background job does, on purpose): the tests that press Ctrl-C on a runner need
    the default back in the processes they start."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # The runners the tests start share one cache (the probe's answer) of their own, not
    # the user's.
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="experiment-runner-tests-cache-")


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `long` (minutes of compiling) go first, so that under pytest-xdist no
    worker starts one when the others are nearly done."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def pytest_unconfigure(config) -> None:
    folder = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.basename(folder).startswith("experiment-runner-tests-cache-"):
        shutil.rmtree(folder, ignore_errors=True)


def cli_command(output_dir: Path, *args: str) -> list[str]:
    return [
        sys.executable, str(PROJECT_ROOT / "experiment_runner.py"),
        "--output-dirname", str(output_dir), "--no-progress", *args,
    ]


def cli_environment() -> dict[str, str]:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(PROJECT_ROOT)] + ([environment["PYTHONPATH"]] if environment.get("PYTHONPATH") else [])
    )
    return environment


@pytest.fixture
def run_cli(tmp_path):
    """Run `experiment_runner.py ARGS` in a child process, output under tmp_path."""

    def run(*args: str, output_dir: Path | None = None, timeout: float = 600) -> CliRun:
        directory = output_dir or tmp_path / "output"
        completed = subprocess.run(
            cli_command(directory, *args), capture_output=True, text=True,
            timeout=timeout, env=cli_environment(), cwd=str(tmp_path),
        )
        return CliRun(completed.returncode, completed.stdout, completed.stderr, directory)

    return run


@pytest.fixture
def fast_args() -> list[str]:
    """Flags that keep a real sweep short."""
    return ["--repeat=2", "--warmup=1", "--accelerator=cpu"]
