"""Every deliberate failure model, in real children, through the real CLI."""

import re
from pathlib import Path

import psutil
import pytest

FAULTS = ["raises", "segfault", "exit", "signal", "hang", "memory_hog"]


@pytest.fixture(scope="module")
def fault_sweep(tmp_path_factory):
    from tests.conftest import CliRun, cli_command, cli_environment
    import subprocess

    output = tmp_path_factory.mktemp("faults") / "output"
    command = cli_command(
        output, "--suite-name=faults", "--accelerator=cpu", "--xla=None", "--dynamo=None",
        "--test=eval", "--repeat=1", "--warmup=1", "--subprocess-timeout=25",
        "--memory-limit-mb=1200",
    )
    completed = subprocess.run(command, capture_output=True, text=True, timeout=600,
                               env=cli_environment())
    run = CliRun(completed.returncode, completed.stdout, completed.stderr, output)
    return run, {line["model"]["model_name"]: line for line in run.lines()}


def test_every_fault_gives_exactly_one_failed_line_and_the_sweep_goes_on(fault_sweep):
    run, lines = fault_sweep
    assert run.returncode == 0, run.stderr
    assert len(run.lines()) == len(FAULTS)
    assert sorted(lines) == sorted(FAULTS)
    for line in lines.values():
        assert line["status"] == "failed"
        assert line["verification_code"] == "VERIFIER_DIDNT_RUN"
        assert 0 < len(line["metrics"]["error"]) <= 4000


@pytest.mark.parametrize("model, expected", [
    ("raises", r"raised RuntimeError: the raises model fails on purpose"),
    ("segfault", r"killed by SIGSEGV \(segmentation fault\)"),
    ("exit", r"exited with status 3 without a result"),
    ("signal", r"killed by SIGTERM"),
    ("hang", r"past the timeout of 25 s; its whole process tree was killed"),
    ("memory_hog", r"over the memory limit of 1200 MiB"),
])
def test_the_error_says_what_happened(fault_sweep, model, expected):
    _, lines = fault_sweep
    assert re.search(expected, lines[model]["metrics"]["error"]), lines[model]["metrics"]["error"]


def test_the_error_carries_the_tail_of_the_childs_output(fault_sweep):
    _, lines = fault_sweep
    assert "last output of the child" in lines["hang"]["metrics"]["error"]
    assert "fault-model grandchild pid" in lines["hang"]["metrics"]["error"]
    assert "traceback" in lines["raises"]["metrics"]["error"]


def test_the_hung_childs_grandchild_is_killed_too(fault_sweep):
    run, lines = fault_sweep
    log = (run.output_dir / lines["hang"]["experiment_id"] / "child.log").read_text()
    pid = int(re.search(r"fault-model grandchild pid (\d+)", log).group(1))
    alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    assert not alive


@pytest.mark.parametrize("model_name", [
    "../../escape", "/etc/passwd", "..", ".", "a/../../b", "~root", "x\x00y", "C:\\evil",
])
def test_a_model_name_cannot_escape_the_output_folder(tmp_path, model_name):
    from runner.config import ExperimentConfig, ModelConfig, RunSettings
    from runner.executor import ExecutorOptions, ExperimentExecutor
    from runner.matrix import PlannedExperiment

    output = tmp_path / "output"
    executor = ExperimentExecutor(ExecutorOptions(output_dir=output), RunSettings())
    planned = PlannedExperiment(ModelConfig("builtin", model_name),
                                ExperimentConfig("cpu", None, None, None, "eval"))
    directory = executor.experiment_dir(planned)
    assert directory.is_absolute()
    assert directory.parent == output.resolve()
    assert directory.name not in (".", "..") and "/" not in directory.name


def test_a_relative_output_folder_is_made_absolute(tmp_path, monkeypatch):
    from runner.config import ExperimentConfig, ModelConfig, RunSettings
    from runner.executor import ExecutorOptions, ExperimentExecutor
    from runner.matrix import PlannedExperiment

    monkeypatch.chdir(tmp_path)
    executor = ExperimentExecutor(ExecutorOptions(output_dir=Path("output")), RunSettings())
    planned = PlannedExperiment(ModelConfig("builtin", "mlp"),
                                ExperimentConfig("cpu", None, None, None, "eval"))
    assert executor.experiment_dir(planned) == tmp_path.resolve() / "output" / planned.experiment_id
