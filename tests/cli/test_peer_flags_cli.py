"""PyTorch/XLA's runner flags through the real CLI: what each does here, or why it cannot."""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys

import pytest

from core.schema import timed_values
from tests.conftest import PROJECT_ROOT, CliRun, cli_command, cli_environment

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

FAKE_TORCHBENCH = PROJECT_ROOT / "tests" / "fixtures" / "fake_torchbench"
FAST = ["--accelerator=cpu", "--repeat=2", "--warmup=1"]


def run(output, *args, timeout=600):
    completed = subprocess.run(cli_command(output, *args), capture_output=True, text=True,
                               env=cli_environment(), timeout=timeout)
    return CliRun(completed.returncode, completed.stdout, completed.stderr, output)


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    """The dummy model trained on eager, PJRT and PJRT+openxla with the peer's observer flags."""
    if importlib.util.find_spec("torch_xla") is None:
        pytest.skip("the XLA experiments need torch_xla (the project's xla extra)")
    output = tmp_path_factory.mktemp("peer-flags") / "output"
    done = run(output, "--suite-name=dummy", *FAST, "--xla=None", "--xla=PJRT", "--dynamo=None",
               "--dynamo=openxla", "--test=train", "--profile-xla",
               "--profile-xla-duration-ms=200", "--save-output", "--collect-full-output",
               "--collect-dynamo-counters", "--profile-cuda-cpu-individual-ops",
               "--timestamp=1700000000.5", "--progress-bar", "--log-level=critical")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = {line["stack_label"]: line for line in done.lines()}
    assert sorted(lines) == ["PJRT", "PJRT+openxla", "eager"]
    for line in lines.values():
        assert line["status"] == "ok", line["metrics"].get("error")
    return done, lines


def folder(run_, line):
    return run_.output_dir / line["artifacts"]["time"]


def test_every_line_carries_the_given_timestamp(observed):
    _, lines = observed
    assert {line["timestamp"] for line in lines.values()} == {1700000000.5}
    assert all(line["finished_at"] > 1700000000.5 for line in lines.values())


def test_profile_xla_writes_an_xplane_trace_for_xla_stacks_only(observed):
    done, lines = observed
    for name in ("PJRT", "PJRT+openxla"):
        traces = list((folder(done, lines[name]) / "xla-profile").rglob("*.xplane.pb"))
        assert traces and traces[0].stat().st_size > 0
        assert lines[name]["summary"]["xla_profile_runs"] >= 1
    assert not (folder(done, lines["eager"]) / "xla-profile").exists()
    assert any(note.startswith("--profile-xla does not apply to the eager stack")
               for note in lines["eager"]["notes"])


def test_save_output_with_full_output_saves_loss_and_gradients_per_timed_run(observed):
    torch = pytest.importorskip("torch")
    done, lines = observed
    for line in lines.values():
        for index in range(2):
            saved = torch.load(folder(done, line) / f"run-{index}" / "output.pt")
            assert set(saved) == {"loss", "gradients"} and saved["loss"].dim() == 0
            assert saved["gradients"]["0.weight"].shape == (512, 32)
        assert not (folder(done, line) / "run-2").exists()


def test_dynamo_counters_are_a_list_one_entry_per_run(observed):
    _, lines = observed
    counters = lines["PJRT+openxla"]["summary"]["dynamo_counters"]
    assert len(counters) == 3  # the warm-up's (compilation shows there), then 2 timed runs
    assert counters[0]["stats"]["unique_graphs"] >= 1
    assert "dynamo_counters" not in lines["PJRT"]["summary"]


def test_individual_ops_use_the_peers_names(observed):
    _, lines = observed
    assert len(lines["eager"]["summary"]["inductor_ops"]) == 2
    assert "xla_unlowered_ops" not in lines["eager"]["summary"]
    for name in ("PJRT", "PJRT+openxla"):
        assert len(lines[name]["summary"]["xla_unlowered_ops"]) == 2
        assert "inductor_ops" not in lines[name]["summary"]


def test_log_level_critical_silences_the_runner(observed):
    done, _ = observed
    assert "INFO" not in done.stderr and "WARNING" not in done.stderr


def test_a_dry_runs_config_runs_exactly_that_experiment(tmp_path):
    dry = run(tmp_path / "out", "--suite-name=dummy", *FAST, "--xla=None", "--dynamo=None",
              "--test=eval", "--test=train", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    configs = [line.strip() for line in dry.stdout.splitlines() if line.startswith("  --model-config=")]
    assert len(configs) == 2
    done = run(tmp_path / "out", "--suite-name=dummy", *FAST, *shlex.split(configs[1]),
               "--pure-wall-time")
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = done.lines()
    assert (line["model"]["model_name"], line["experiment"]["test"]) == ("dummy", "train")
    assert line["status"] == "ok" and line["experiment"]["batch_size"] == 16
    assert len(timed_values(line, "per_iter_time")) == 2
    # --pure-wall-time needs CUDA streams: on the CPU the host clock timed it, and says so.
    assert line["summary"]["timing_clock"] == "host"
    assert any(note.startswith("--pure-wall-time does not apply") for note in line["notes"])
    # Exactly this experiment, even when the results already hold it (no resume applies).
    again = run(tmp_path / "out", "--suite-name=dummy", *FAST, *shlex.split(configs[1]))
    assert again.returncode == 0 and len(again.lines()) == 2


def test_no_skip_runs_what_the_suite_would_skip(tmp_path):
    args = ["--suite-name=torchbench", f"--torchbench-dir={FAKE_TORCHBENCH}", *FAST,
            "--xla=None", "--dynamo=None", "--test=train", "-k", "^tiny_dict_eval_only$"]
    skipped = run(tmp_path / "skip", *args)
    (line,) = skipped.lines()
    assert line["status"] == "skipped" and "artifacts" not in line  # no child ran
    assert line["metrics"] == {"error": "SKIP"} and line["experiment"]["accelerator_model"]
    forced = run(tmp_path / "forced", *args, "--no-skip")
    (line,) = forced.lines()
    assert line["artifacts"]["time"]  # a child tried it
    assert line["status"] in ("failed", "skipped") and line["metrics"]["error"]


@pytest.mark.parametrize("argv, message", [
    (["--xla=XRT"], "XRT was removed from PyTorch/XLA (2.1 was the last release with it)"),
    (["--keep-model-data-on-cuda"], "XLA:CUDA, removed from torch_xla after 2.8"),
    (["--model-config", '{"model_name": "dummy"}'], "--model-config and --experiment-config go together"),
    (["--filter-by-tier=1"], "suite 'dummy' has no tiers"),
])
def test_flags_that_cannot_apply_say_why(tmp_path, argv, message):
    done = run(tmp_path / "out", "--suite-name=dummy", "--dry-run", *argv)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_tiers_pick_torchbench_models_by_name(tmp_path):
    done = run(tmp_path / "out", "--suite-name=torchbench", f"--torchbench-dir={FAKE_TORCHBENCH}",
               "--accelerator=cpu", "--filter-by-tier=1", "--dry-run")
    assert done.returncode == 2 and "--filter-by-tier" in done.stderr  # no tier-1 model there
    done = run(tmp_path / "out", "--suite-name=torchbench", f"--torchbench-dir={FAKE_TORCHBENCH}",
               "--accelerator=cpu", "--xla=None", "--dynamo=None", "--test=eval",
               "--exclude-by-tier=1", "--exclude-by-tier=2", "--dry-run")
    assert done.returncode == 0 and "2 experiment(s) would run" in done.stdout


def test_the_entry_point_says_how_to_set_up_without_the_runners_requirements(tmp_path):
    # -I -S: no site-packages, as a system Python before `make setup` (no psutil, tqdm, ...).
    completed = subprocess.run([sys.executable, "-I", "-S", str(PROJECT_ROOT / "experiment_runner.py"),
                                "--help"], capture_output=True, text=True, timeout=60,
                               cwd=str(tmp_path))
    assert completed.returncode == 2 and completed.stdout == ""
    (message,) = completed.stderr.strip().splitlines()
    assert message.endswith("set up first: make setup (or use .venv/bin/python)")
    assert "psutil" in message
