"""--jobs and --devices: real sweeps, several children at a time, one results file."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from types import SimpleNamespace

import psutil
import pytest

from core.files.results_file import read_results
from runner.run.sweep import expected_durations, longest_first
from tests.conftest import cli_command, cli_environment
from tests.runner.run.record.test_claims import grandchild_pid

EAGER = ["--accelerator=cpu", "--xla=None", "--dynamo=None", "--test=eval", "--repeat=2",
         "--warmup=1"]
TWO_CORES = len(os.sched_getaffinity(0)) >= 2
needs_two_cores = pytest.mark.skipif(not TWO_CORES, reason="needs two cores to pin two jobs")


def interval(line):
    end = line["finished_at"]
    return end - line["summary"]["wall_time"], end


@pytest.mark.e2e
@pytest.mark.runner_defaults  # the threads of a child come from its slot's cores
@needs_two_cores
def test_two_jobs_run_side_by_side_on_disjoint_pinned_cores(run_cli):
    run = run_cli(*EAGER, "--jobs=2")
    assert run.returncode == 0, run.stderr
    lines = run.lines()
    assert sorted(line["model"]["model_name"] for line in lines) == ["cnn", "mlp", "transformer_block"]
    assert all(line["status"] == "ok" for line in lines)
    affinities = [tuple(line["environment"]["torch_settings"]["cpu_affinity"]) for line in lines]
    assert all(len(cores) == 1 for cores in affinities)  # two cores, two jobs: one core each
    assert len(set(affinities)) == 2
    assert all(line["environment"]["torch_settings"]["num_threads"] == 1 for line in lines)
    # Some two experiments ran at the same time.
    spans = sorted(interval(line) for line in lines)
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))


@pytest.mark.e2e
def test_devices_on_a_cpu_sweep_are_refused_before_anything_runs(run_cli):
    # Issue 23: --devices was accepted on CPU runs (each CPU job then got a CUDA device it
    # never used); which device each CUDA job sees is tested with plan_slots (test_slots).
    run = run_cli(*EAGER, "--devices=3,5")
    assert run.returncode == 2, run.stderr
    assert "--devices=3,5 names CUDA devices, and this sweep runs no CUDA experiment" in run.stderr
    assert not run.results_path.exists()
    run = run_cli(*EAGER, "--experiments-per-gpu=2")
    assert run.returncode == 2, run.stderr
    assert "--experiments-per-gpu=2 shares GPUs, and this sweep runs no CUDA experiment" in run.stderr
    assert not run.results_path.exists()


@pytest.mark.e2e
@needs_two_cores
@pytest.mark.waits
def test_a_hanging_experiment_does_not_hold_up_the_other_job(run_cli):
    run = run_cli("--suite-name=faults", "-k", "^(hang|raises)$", *EAGER, "--jobs=2",
                  "--subprocess-timeout=14")
    assert run.returncode == 0, run.stderr
    lines = {line["model"]["model_name"]: line for line in run.lines()}
    assert "past the timeout of 14 s" in lines["hang"]["metrics"]["error"]
    assert "raises" in lines["raises"]["metrics"]["error"].lower()
    # The quick one finished while the hanging one still ran.
    assert lines["raises"]["finished_at"] < lines["hang"]["finished_at"] - 5


@pytest.mark.e2e
@pytest.mark.parametrize("flag, message", [
    ("--jobs=4096", "--jobs=4096 needs at least 4096 cores"),
    ("--devices=0,,1", "'0,,1' is not a comma-separated list of devices"),
    ("--jobs=0", "--jobs"),
])
def test_impossible_job_requests_exit_2_naming_the_value(run_cli, flag, message):
    run = run_cli(*EAGER, flag)
    assert run.returncode == 2
    assert message in run.stderr


@pytest.mark.e2e
@needs_two_cores
def test_ctrl_c_kills_every_running_child_and_keeps_finished_lines(tmp_path):
    output = tmp_path / "output"
    runner = subprocess.Popen(
        cli_command(output, "--suite-name=faults", "-k", "^hang$", *EAGER[:-3], "--test=eval",
                    "--test=train", "--repeat=1", "--warmup=0", "--jobs=2"),
        env=cli_environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = grandchild_pid(output)
    deadline = time.monotonic() + 120
    while len(list(output.glob("*/*/time/child.log"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)
    runner.send_signal(signal.SIGINT)
    _, stderr = runner.communicate(timeout=120)
    assert runner.returncode == 130, stderr
    assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE
    assert not (output / "results.jsonl").exists() or read_results(output / "results.jsonl").lines == []
    assert "0 experiment(s) finished and recorded" in stderr


def planned(model, label="eager", test="eval"):
    return SimpleNamespace(model=SimpleNamespace(model_name=model), label=label,
                           experiment=SimpleNamespace(test=test, to_dict=lambda: {
                               "test": test, "precision": "fp32", "accelerator": "cpu",
                               "batch_size": None}))


def line(model, wall, status="ok", label="eager"):
    return {"model": {"model_name": model}, "stack_label": label, "status": status,
            "experiment": {"test": "eval", "precision": "fp32", "accelerator": "cpu",
                           "batch_size": None}, "summary": {"wall_time": wall}}


def test_longest_first_puts_never_timed_experiments_first_then_the_slowest():
    durations = expected_durations([line("a", 1.0), line("b", 30.0), line("b", 10.0),
                                    line("c", 5.0), line("d", 99.0, status="skipped")])
    assert durations == {
        "a|eager|eval|fp32|cpu|None": 1.0, "b|eager|eval|fp32|cpu|None": 20.0,
        "c|eager|eval|fp32|cpu|None": 5.0}
    order = longest_first([planned(name) for name in "abcd"], durations)
    assert [item.model.model_name for item in order] == ["d", "b", "c", "a"]


def test_durations_leave_out_lines_whose_parts_are_not_objects():
    odd = [dict(line("a", 1.0), summary="n/a"), dict(line("a", 1.0), model="x"),
           dict(line("a", 2.0), experiment=["y"]), line("a", 3.0)]
    assert expected_durations(odd) == {
        "a|eager|eval|fp32|cpu|None": 3.0, "|eager|eval|fp32|cpu|None": 1.0,
        "a|eager|None|None|None|None": 2.0}  # each odd part read as empty, never a crash


def test_without_durations_the_plan_order_stays():
    order = longest_first([planned(name) for name in "cab"], {})
    assert [item.model.model_name for item in order] == ["c", "a", "b"]


def test_never_timed_training_goes_before_never_timed_inference_in_plan_order():
    order = longest_first([planned("c"), planned("c", test="train"), planned("a"),
                           planned("a", test="train"), planned("b")],
                          {"b|eager|eval|fp32|cpu|None": 50.0})
    assert [(item.model.model_name, item.experiment.test) for item in order] == [
        ("c", "train"), ("a", "train"), ("c", "eval"), ("a", "eval"), ("b", "eval")]
