"""Failures of the host, not of the experiment (issue 54, rough edges): a full TMPDIR or
PYTHONWARNINGS=error recorded every experiment as its own failure, which resume never retries;
a full output disk said "the child could not write its result ()"."""

from __future__ import annotations

import errno
import os
import resource
import subprocess

import pytest

from child.host_failures import host_cause
from core.config import ExperimentConfig, ModelConfig, RunSettings
from core.contract import ChildError, ChildResult
from core.schema import Status
from runner.plan.matrix import PlannedExperiment
from runner.plan.resume import covers
from runner.run.process.supervision import ChildOutcome
from runner.run.record.lines import SweepInfo, line_from_outcome
from tests.conftest import CliRun, cli_command, cli_environment

MLP = ["--suite-name=builtin", "-k", "^mlp$", "--accelerator=cpu", "--xla=None",
       "--dynamo=None", "--test=eval", "--batch-size=2", "--repeat=2", "--warmup=1"]
PLANNED = PlannedExperiment(ModelConfig("builtin", "mlp"),
                            ExperimentConfig("cpu", None, None, None, "eval", stack="eager"),
                            "eager")


def raised(error: BaseException, cause: BaseException | None = None) -> BaseException:
    try:
        try:
            if cause is not None:
                raise cause
        except BaseException as inner:
            raise error from inner
        raise error
    except BaseException as caught:
        return caught


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, "No space left on device"),
    OSError(errno.EDQUOT, "Disk quota exceeded"),
    raised(RuntimeError("the backend failed"), OSError(errno.EFBIG, "File too large")),
    RuntimeError("unable to write to file </torch_1_0>: No space left on device (28)"),
    UserWarning("Please use the new API settings to control TF32 behavior"),
    raised(RuntimeError("compile failed"), DeprecationWarning("old")),
])
def test_a_full_disk_or_a_warning_raised_as_an_error_is_the_hosts(error):
    assert host_cause(error)


@pytest.mark.parametrize("error", [
    RuntimeError("the raises model fails on purpose"), MemoryError(),
    OSError(errno.ENOENT, "No such file or directory"), ValueError("shapes differ"),
])
def test_the_experiments_own_failures_stay_its_own(error):
    assert host_cause(error) is None


def test_a_host_failure_is_recorded_as_one_resume_retries(tmp_path):
    def line_of(error: ChildError) -> dict:
        result = ChildResult(status=Status.FAILED, error=error)
        outcome = ChildOutcome(tmp_path, returncode=1, result=result)
        return line_from_outcome(RunSettings(), SweepInfo(run_id="r"), PLANNED,
                                 outcome).to_dict()

    host = line_of(ChildError("OSError: [Errno 28] No space left on device", "",
                              "the host refused a file operation: No space left on device"))
    assert host["failure_kind"] == "infrastructure"
    assert "No space left on device (resume runs it again)" in host["metrics"]["error"]
    assert not covers(host, RunSettings())
    own = line_of(ChildError("RuntimeError: fails on purpose"))
    assert own["failure_kind"] == "experiment" and covers(own, RunSettings())


def run_with(tmp_path, environment: dict, limit_bytes: int | None = None) -> CliRun:
    output = tmp_path / "output"

    def limit() -> None:
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    completed = subprocess.run(cli_command(output, *MLP), capture_output=True, text=True,
                               timeout=300, env={**cli_environment(), **environment},
                               preexec_fn=limit, cwd=str(tmp_path))
    return CliRun(completed.returncode, completed.stdout, completed.stderr, output)


@pytest.mark.e2e
def test_pythonwarnings_error_does_not_fail_the_experiments(tmp_path):
    run = run_with(tmp_path, {"PYTHONWARNINGS": "error"})
    assert run.returncode == 0, run.stderr
    [line] = run.lines()
    assert line["status"] == "ok", line["metrics"].get("error")


@pytest.mark.e2e
def test_a_result_that_cannot_be_written_is_reported_with_the_reason(tmp_path):
    # A file-size limit of 4 KiB: the child's spec and log fit, its result does not.
    run = run_with(tmp_path, {}, limit_bytes=4096)
    assert run.returncode != 0
    assert "the child could not write its result (File too large)" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert os.path.exists(run.output_dir)
