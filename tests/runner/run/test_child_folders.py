"""Each child in its own folder, keyed by run and role; suite options in the identity."""

from __future__ import annotations

import importlib.util
import os

import pytest

from core.contract import ChildResult, ChildSpec, Role, read_message

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

EAGER = ["--accelerator=cpu", "--xla=None", "--dynamo=None", "--test=eval", "--filter=^mlp$",
         "--repeat=1", "--warmup=1"]


def test_a_reduced_run_does_not_cover_the_full_size_run(run_cli, tmp_path, monkeypatch):
    output = tmp_path / "shared"
    monkeypatch.setenv("EXPERIMENT_RUNNER_SMALL_MODELS", "1")
    reduced = run_cli(*EAGER, output_dir=output)
    monkeypatch.delenv("EXPERIMENT_RUNNER_SMALL_MODELS")
    full = run_cli(*EAGER, output_dir=output)
    assert reduced.returncode == 0 and full.returncode == 0, full.stderr
    assert "already recorded" not in full.stdout
    lines = full.lines()
    assert [line["model"]["reduced"] for line in lines] == [True, False]
    assert lines[0]["fingerprint"] != lines[1]["fingerprint"]
    # The child learnt the option from its spec, not from the environment.
    spec = read_message(output / lines[0]["artifacts"]["time"] / "spec.json", ChildSpec)
    assert spec.model.reduced is True and spec.role is Role.TIME
    again = run_cli(*EAGER, output_dir=output)
    assert "1 experiment(s) already recorded" in again.stdout


def test_a_bad_small_models_value_is_a_usage_error(run_cli, monkeypatch):
    monkeypatch.setenv("EXPERIMENT_RUNNER_SMALL_MODELS", "maybe")
    run = run_cli(*EAGER)
    assert run.returncode == 2
    assert "EXPERIMENT_RUNNER_SMALL_MODELS" in run.stderr and "'maybe'" in run.stderr
    assert "Traceback" not in run.stderr


def test_two_runs_keep_their_own_child_folders(run_cli, tmp_path):
    output = tmp_path / "out"
    first = run_cli(*EAGER, "--no-resume", output_dir=output)
    second = run_cli(*EAGER, "--no-resume", output_dir=output)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    (line,) = second.lines()
    previous = next(output.glob("results.jsonl.*.bak"))
    from core.files.results_file import read_results

    (old_line,) = read_results(previous).lines
    assert old_line["experiment_id"] == line["experiment_id"]
    assert old_line["artifacts"]["time"] != line["artifacts"]["time"]
    for recorded in (old_line, line):
        folder = output / recorded["artifacts"]["time"]
        result = read_message(folder / "result.json", ChildResult)
        assert result.metrics["per_iter_time"] == recorded["metrics"]["per_iter_time"]


@pytest.mark.skipif(importlib.util.find_spec("torch_xla") is None, reason="needs torch_xla")
def test_the_verification_child_never_touches_the_timing_childs_dumps(run_cli, tmp_path):
    output = tmp_path / "out"
    run = run_cli("--accelerator=cpu", "--xla=PJRT", "--dynamo=None", "--test=eval",
                  "--filter=^mlp$", "--repeat=1", "--warmup=1", "--verify", "--dump-hlo",
                  "--save-ir-format=text", output_dir=output)
    assert run.returncode == 0, run.stderr
    (line,) = run.lines()
    assert line["verification_code"] == "PASS" and line["experiment"]["stack"] == "xla_lazy"
    timing, verifying = (output / line["artifacts"][role] for role in ("time", "verify"))
    assert timing.parent == verifying.parent and timing.name == "time" and verifying.name == "verify"
    assert any((timing / "hlo").iterdir()) and any((timing / "ir").iterdir())
    assert sorted(os.listdir(verifying)) == ["child.log", "result.json", "spec.json"]
    assert read_message(verifying / "spec.json", ChildSpec).role is Role.VERIFY


# An experiment's folder that is a symbolic link (issue 54, defect 11 and a rough edge): a loop
# crashed the runner (RuntimeError from Path.resolve), a link to a folder elsewhere let the
# child write outside the output folder. Either is moved aside, a folder made in its place,
# and the line says so.
TWO = ["--accelerator=cpu", "--xla=None", "--dynamo=None", "--test=eval", "--filter=^mlp$",
       "--filter=^cnn$", "--batch-size=2", "--repeat=1", "--warmup=1"]


def test_a_linked_experiment_folder_is_moved_aside_and_the_line_written(run_cli, tmp_path):
    first = run_cli(*TWO, output_dir=tmp_path / "first")
    assert first.returncode == 0, first.stderr
    ids = {line["model"]["model_name"]: line["experiment_id"] for line in first.lines()}
    output = tmp_path / "output"
    output.mkdir()
    loop = output / ids["mlp"]
    loop.symlink_to(ids["mlp"])  # a link to itself
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (output / ids["cnn"]).symlink_to(elsewhere)
    run = run_cli(*TWO, output_dir=output, timeout=300)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    lines = {line["model"]["model_name"]: line for line in run.lines()}
    assert sorted(lines) == ["cnn", "mlp"]
    for name, line in lines.items():
        assert line["status"] == "ok", line
        folder = output / ids[name]
        assert folder.is_dir() and not folder.is_symlink()
        assert (output / line["artifacts"]["time"] / "result.json").is_file()
        assert any("moved aside" in note and str(folder) in note for note in line["notes"])
        assert os.path.islink(output / f"{ids[name]}.moved-aside")
    assert list(elsewhere.iterdir()) == []  # nothing written outside the output folder
    assert "moved aside" in run.stderr
