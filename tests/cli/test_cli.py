"""The runner end to end: real sweeps in real child processes."""

import json
import shutil
import signal
import statistics
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

import psutil
import pytest

from core.config import fingerprint_of_line
from core.schema import timed_values
from tests.conftest import CliRun, cli_command, cli_environment

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)


class MlpSweep(NamedTuple):
    """The module's sweep: the first run and its lines, the same command again and the lines
    after it, the output folder, and the temporary folder (TMPDIR) both runs had."""

    first: subprocess.CompletedProcess
    second: subprocess.CompletedProcess
    lines: list
    after: list
    output: Path
    host_temp: Path


@pytest.fixture(scope="module")
def mlp_sweep(tmp_path_factory) -> MlpSweep:
    output = tmp_path_factory.mktemp("sweep") / "output"
    host_temp = tmp_path_factory.mktemp("host-temp")
    args = ["-k", "mlp", "--accelerator=cpu", "--xla=None", "--dynamo=None",
            "--dynamo=inductor", "--test=eval", "--test=train", "--repeat=3", "--warmup=2"]
    environment = {**cli_environment(), "TMPDIR": str(host_temp)}
    first = subprocess.run(cli_command(output, *args), capture_output=True, text=True,
                           env=environment, timeout=900)
    lines = CliRun(first.returncode, first.stdout, first.stderr, output).lines()
    second = subprocess.run(cli_command(output, *args), capture_output=True, text=True,
                            env=environment, timeout=900)
    return MlpSweep(first, second, lines, CliRun(0, "", "", output).lines(), output, host_temp)


def test_inductors_precompiled_headers_stay_in_the_hosts_temporary_folder(mlp_sweep):
    """A child's TMPDIR is its runner's scratch, removed at the runner's end; inductor's
    precompiled C++ headers go where torch keeps them for every process of the host (under
    the runner's own temporary folder), so that the next sweep's compiles reuse them."""
    assert mlp_sweep.first.returncode == 0, mlp_sweep.first.stderr
    headers = list(mlp_sweep.host_temp.glob("torchinductor_*/precompiled_headers/*.[gp]ch"))
    assert headers, sorted(str(path) for path in mlp_sweep.host_temp.rglob("*"))[:40]
    assert not list(mlp_sweep.host_temp.glob("experiment-runner-*"))  # the scratch is gone


def test_sweep_writes_one_complete_line_per_experiment(mlp_sweep):
    first, lines = mlp_sweep.first, mlp_sweep.lines
    assert first.returncode == 0, first.stderr
    stacks = sorted((l["experiment"]["dynamo"] or "eager", l["experiment"]["test"]) for l in lines)
    assert stacks == [("eager", "eval"), ("eager", "train"), ("inductor", "eval"), ("inductor", "train")]
    for line in lines:
        metrics = line["metrics"]
        assert line["status"] == "ok", metrics.get("error")
        assert line["verification_code"] == "VERIFIER_SKIPPED"
        summary = line["summary"]
        assert line["repeat"] == 3 and line["iterations_per_run"] == 1
        # The cold-start run leads the per-run lists (PyTorch/XLA's layout), then 3 timed runs.
        assert len(metrics["total_time"]) == len(metrics["per_iter_time"]) == 4
        assert summary["cold_start_entries"] == 1
        assert all(t > 0 for t in metrics["per_iter_time"])
        assert len(summary["warmup_times"]) == 2
        assert summary["cold_start_time"] == summary["warmup_times"][0] == metrics["total_time"][0]
        assert summary["peak_host_memory_bytes"] > 50 * 2**20
        assert line["experiment"]["batch_size"] == 16  # the batch size used
        assert line["experiment"]["requested_batch_size"] is None  # the suite's default
        # Inductor's mode, not given: its default, recorded (eager has none).
        assert line["experiment"]["mode"] == ("default" if line["experiment"]["dynamo"] else None)
        # The cold start less a steady iteration, never below zero (eager compiles nothing, and
        # on a loaded machine its cold start can beat the median).
        assert summary["compile_time_s"] == pytest.approx(max(
            summary["cold_start_time"] - statistics.median(timed_values(line, "per_iter_time")), 0.0))
        assert line["experiment"]["accelerator_model"]
        assert line["environment"]["torch"] and line["environment"]["python"]
        assert line["command"].startswith("experiment-runner ") and "-k mlp" in line["command"]
        assert fingerprint_of_line(line) == line["fingerprint"]
    assert len({line["run_id"] for line in lines}) == 1
    inductor_eval = next(l for l in lines if l["experiment"]["dynamo"] and l["experiment"]["test"] == "eval")
    eager_eval = next(l for l in lines if not l["experiment"]["dynamo"] and l["experiment"]["test"] == "eval")
    # Compilation shows in the cold start of inductor, not in its steady state.
    assert inductor_eval["summary"]["cold_start_time"] > 10 * max(
        timed_values(inductor_eval, "per_iter_time"))
    assert inductor_eval["summary"]["cold_start_time"] > eager_eval["summary"]["cold_start_time"]
    # Inductor was timed interleaved with eager in its child.
    paired = inductor_eval["summary"]["paired_speedup"]
    assert paired["method"] == "paired" and paired["pairs"] == 3
    assert len(timed_values(inductor_eval, "eager_per_iter_time")) == 3
    assert "paired_speedup" not in eager_eval["summary"]
    assert "median/iter" in first.stdout and "4 experiment(s) recorded" in first.stdout


def test_rerunning_the_same_command_adds_no_line(mlp_sweep):
    second, lines, after = mlp_sweep.second, mlp_sweep.lines, mlp_sweep.after
    assert second.returncode == 0, second.stderr
    assert "4 experiment(s) already recorded" in second.stdout
    assert len(after) == len(lines) == 4


def wait_for_lines(path, count, process, limit=300):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= count:
            return
        assert process.poll() is None, "the runner ended before it could be interrupted"
        time.sleep(0.2)
    raise AssertionError("no line appeared in time")


def children_still_running(output, grace=10.0):
    deadline = time.monotonic() + grace
    while True:
        alive = [p for p in psutil.process_iter(["cmdline"])
                 if "child.worker" in (p.info["cmdline"] or [])
                 and any(str(output) in part for part in p.info["cmdline"])]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


EAGER_SWEEP = ["--accelerator=cpu", "--xla=None", "--dynamo=None", "--repeat=2", "--warmup=1"]


def test_sigkill_of_the_parent_then_rerun_completes_without_duplicates(tmp_path):
    output = tmp_path / "output"
    results = output / "results.jsonl"
    process = subprocess.Popen(cli_command(output, *EAGER_SWEEP), env=cli_environment(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_lines(results, 2, process)
    process.kill()
    process.wait()
    assert not children_still_running(output), "the SIGKILLed runner left its child running"
    written = results.read_bytes().count(b"\n")
    assert 2 <= written < 6
    rerun = subprocess.run(cli_command(output, *EAGER_SWEEP), capture_output=True, text=True,
                           env=cli_environment(), timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{written} experiment(s) already recorded" in rerun.stdout
    lines = CliRun(0, "", "", output).lines()
    fingerprints = [line["fingerprint"] for line in lines]
    assert len(fingerprints) == len(set(fingerprints)) == 6


def test_ctrl_c_kills_the_child_keeps_finished_lines_and_exits_130(tmp_path):
    output = tmp_path / "output"
    results = output / "results.jsonl"
    process = subprocess.Popen(cli_command(output, *EAGER_SWEEP), env=cli_environment(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_lines(results, 1, process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "interrupted" in stderr and "resume" in stderr
    lines = CliRun(0, "", "", output).lines()
    assert 1 <= len(lines) < 6 and all(line["status"] == "ok" for line in lines)


def test_no_resume_starts_a_new_file_and_keeps_the_old_one(tmp_path, run_cli, mlp_sweep):
    args = ["-k", "^mlp$", "--accelerator=cpu", "--xla=None", "--dynamo=None", "--test=eval",
            "--repeat=1", "--warmup=1"]
    # The old file: the module's sweep's, which already records this experiment (its
    # fingerprint leaves out how it is measured: repeats and warm-up).
    (tmp_path / "output").mkdir()
    shutil.copy(mlp_sweep.output / "results.jsonl", tmp_path / "output" / "results.jsonl")
    assert "0 experiment(s) would run; 1 already recorded" in run_cli(*args, "--dry-run").stdout
    again = run_cli(*args, "--no-resume")
    assert again.returncode == 0, again.stderr
    backups = list(again.output_dir.glob("results.jsonl.*.bak"))
    assert len(backups) == 1 and "previous results kept in" in again.stdout
    assert len(again.lines()) == 1
    assert json.loads(backups[0].read_text().splitlines()[0])["model"]["model_name"] == "mlp"


def test_a_corrupted_existing_line_is_reported_and_skipped(tmp_path, run_cli):
    args = ["-k", "^mlp$", "--accelerator=cpu", "--xla=None", "--dynamo=None", "--test=eval",
            "--repeat=1", "--warmup=1"]
    output = tmp_path / "output"
    output.mkdir()
    (output / "results.jsonl").write_text('{"model": {"suite_name": "builtin"\n', encoding="utf-8")
    run = run_cli(*args)
    assert run.returncode == 0, run.stderr
    assert "results.jsonl line 1 skipped" in run.stderr
    raw = run.results_path.read_text().splitlines()
    assert raw[0] == '{"model": {"suite_name": "builtin"'  # never rewritten
    assert len(run.lines()) == 1


@pytest.mark.parametrize("args, message", [
    (["--suite-name=nosuch"], "unknown suite 'nosuch'"),
    (["-k", "mlp("], "--filter 'mlp(' is not a valid regular expression"),
    (["-x", "[z"], "--exclude '[z' is not a valid regular expression"),
    (["-k", "resnet"], "no model of suite 'builtin' matches"),
    (["--batch-size=0"], "argument --batch-size: batch_size 0 must be at least 1"),
    (["--accelerator=gpu"], 'argument --accelerator: accelerator "gpu" is not one of: cpu, cuda, tpu'),
    (["--xla=XRT"], "--xla XRT: XRT was removed from PyTorch/XLA"),
    (["--xla=TPU"], 'argument --xla: xla "TPU" is not one of: None, PJRT'),
    (["--torch-xla2=jax"], 'argument --torch-xla2: torch_xla2 "jax" is not one of'),
    (["--repeat=many"], "'many' is not an integer"),
    (["--total-partitions=2", "--partition-id=2"], "--partition-id must be in [0, 2)"),
])
def test_bad_input_names_the_value_and_exits_non_zero(run_cli, args, message):
    run = run_cli("--dry-run", *args)
    assert run.returncode == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr


def test_dry_run_lists_experiments_and_debug_lists_dropped_ones(run_cli):
    run = run_cli("--dry-run", "--log-level=debug", "--accelerator=cpu", "--xla=None",
                  "--dynamo=None", "--dynamo=openxla", "--test=eval")
    assert run.returncode == 0
    assert run.stdout.count("dynamo=None") == 3 and "3 experiment(s) would run" in run.stdout
    assert "dropped cpu xla=None dynamo=openxla" in run.stderr and "needs xla=PJRT" in run.stderr
    assert not run.results_path.exists()


def test_list_models_prints_names_and_batch_sizes(run_cli):
    run = run_cli("--list-models")
    assert run.returncode == 0
    assert run.stdout.splitlines() == ["mlp\t16", "cnn\t8", "transformer_block\t4"]
