"""The report commands under a file-size limit (`ulimit -f`), as a full disk leaves them:
the cache is only a slower read, and a scratch file that cannot be written is the machine's
trouble, never the results file's (issue 54, defect 7)."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT, cli_environment
from tests.reports.conftest import craft_line

pytestmark = pytest.mark.e2e


def _limited(*args: str) -> subprocess.CompletedProcess:
    """`experiment_runner.py ARGS` with files limited to 1 KiB."""
    command = " ".join(shlex.quote(part) for part in (
        sys.executable, str(PROJECT_ROOT / "experiment_runner.py"), *args))
    return subprocess.run(["bash", "-c", f"ulimit -f 1; exec {command}"], capture_output=True,
                          text=True, timeout=300, env=cli_environment())


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from core.files.results_file import append_line

    path = tmp_path_factory.mktemp("limits") / "results.jsonl"
    for model, seconds in (("mlp", 0.25), ("cnn", 0.5)):
        line = craft_line(model, times=[seconds, seconds])
        line["environment"] = {"padding": "x" * 2000}  # lines, and their scratch copy, over 1 KiB
        append_line(path, line)
    return path


def test_a_cache_that_cannot_be_written_reads_without_it(results, tmp_path):
    done = _limited("report", str(results), "--cache-dir", str(tmp_path / "cache"))
    assert done.returncode == 0, done.stderr
    assert "250 ms" in done.stdout and "500 ms" in done.stdout
    assert "the reports' cache cannot be written" in done.stderr
    assert "cannot read results file" not in done.stderr and "Traceback" not in done.stderr
    compared = _limited("compare", str(results), str(results), "--cache-dir", str(tmp_path / "cache"))
    assert compared.returncode == 0, compared.stderr


def test_no_cache_scratch_that_cannot_be_written_is_the_machines_trouble(results):
    # The details of the lines selected are read again from a scratch copy of them.
    done = _limited("report", str(results), "--no-cache")
    assert done.returncode == 4, done.stderr
    assert "cannot write the reports' scratch files" in done.stderr and "TMPDIR" in done.stderr
    assert "Traceback" not in done.stderr and "cannot read results file" not in done.stderr
