"""An experiment's folder that is a symbolic link (issue 54, defect 11 and a rough edge): a loop
crashed the runner (RuntimeError from Path.resolve), a link to a folder elsewhere let the
child write outside the output folder. Either is moved aside, a folder made in its place,
and the line says so."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

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
