"""What a user reads at the console of real sweeps, their output going to a file (a log, CI):
progress as lines, no carriage-return frames, the end-of-sweep table of every requested
experiment in the same order from run to run, resumed runs included."""

import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import PROJECT_ROOT, TEST_RUN_FLAGS, cli_environment

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

SWEEP = ["--suite-name=dummy", "--accelerator=cpu", "--xla=None", "--test=eval", "--repeat=3",
         "--warmup=1", *TEST_RUN_FLAGS]
BOTH = ["--dynamo=None", "--dynamo=aot_eager"]


class Runs(NamedTuple):
    eager: subprocess.CompletedProcess
    resumed: subprocess.CompletedProcess
    again: subprocess.CompletedProcess
    output: Path


def sweep(output: Path, *args: str) -> subprocess.CompletedProcess:
    """The runner with its progress shown (no --no-progress), stdout and stderr to pipes."""
    command = [sys.executable, str(PROJECT_ROOT / "experiment_runner.py"),
               "--output-dirname", str(output), *SWEEP, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env=cli_environment())
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    """Eager alone; then eager and aot_eager (eager read back); then the same again (all read
    back). The second asks for the profiles' files."""
    output = tmp_path_factory.mktemp("console") / "output"
    eager = sweep(output, "--dynamo=None")
    resumed = sweep(output, *BOTH, "--dump-pytorch-profiles")
    again = sweep(output, *BOTH)
    return Runs(eager, resumed, again, output)


def table(stdout: str) -> list[dict[str, str]]:
    """The end-of-sweep table's rows as {column: cell}."""
    rows = stdout.split("\n")
    start = next(i for i, row in enumerate(rows) if row.startswith("model "))
    header = re.split(r"\s{2,}", rows[start].strip())
    found = []
    for row in rows[start + 1:]:
        cells = re.split(r"\s{2,}", row.strip())
        if len(cells) < len(header) - 1:
            break
        found.append(dict(zip(header, cells)))
    return found


def test_a_log_gets_one_line_per_experiment_and_no_carriage_return(runs):
    for run in (runs.eager, runs.resumed, runs.again):
        assert "\r" not in run.stderr and "\r" not in run.stdout
    progress = [row for row in runs.resumed.stderr.splitlines() if re.match(r"INFO: \[\d+/\d+\]", row)]
    assert len(progress) == 1 and progress[0].startswith("INFO: [1/1] dummy cpu aot_eager eval: ok, ")
    # Nothing the user did not ask for is reported as left out.
    assert "left out" not in runs.resumed.stderr


def test_the_table_has_the_figures_and_every_requested_row(runs):
    lines = [row for row in (runs.output / "results.jsonl").read_text().splitlines() if row]
    assert len(lines) == 2
    rows = table(runs.resumed.stdout)
    assert [(row["model"], row["stack"]) for row in rows] == [("dummy", "eager"), ("dummy", "aot_eager")]
    assert [row["recorded"] for row in rows] == ["earlier", "now"]
    eager, compiled = rows
    assert eager["speedup"] == "-" and re.fullmatch(r"\d+\.\d\dx", compiled["speedup"])
    assert all(re.fullmatch(r"[\d.]+ (ms|s)", row["cold start"]) for row in rows)
    assert all(row["timings"] == "ok" or row["timings"].startswith("unreliable: ")
               for row in rows)
    assert "1 experiment(s) recorded in" in runs.resumed.stdout
    assert f"experiment-runner report {runs.output / 'results.jsonl'}" in runs.resumed.stdout
    (pointer,) = [row for row in runs.resumed.stdout.splitlines()
                  if row.startswith("--dump-pytorch-profiles: ")]
    folder = Path(pointer.split(", e.g. ")[1])
    assert list(folder.glob("run-*/trace.json"))


def test_a_fully_resumed_run_prints_the_same_table(runs):
    again = table(runs.again.stdout)
    assert [row["recorded"] for row in again] == ["earlier", "earlier"]
    assert [{k: v for k, v in row.items() if k != "recorded"} for row in again] == [
        {k: v for k, v in row.items() if k != "recorded"} for row in table(runs.resumed.stdout)]
    assert "0 experiment(s) recorded in" in runs.again.stdout
    assert "2 read back from earlier runs" in runs.again.stdout
