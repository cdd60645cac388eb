"""`experiment-runner compare` names the settings that differ between two results files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.files.results_file import append_line
from reports.analyse.settings_diff import settings_differences
from reports.cli import compare_main
from tests.conftest import TEST_RUN_FLAGS, cli_environment

ROOT = Path(__file__).resolve().parents[3]


def lines_with(path: Path, *settings: dict) -> Path:
    for index, value in enumerate(settings):
        append_line(path, {"model": {"model_name": f"m{index}"},
                           "environment": {"torch_settings": value}})
    return path


def test_values_over_all_lines_of_each_side(tmp_path):
    base = lines_with(tmp_path / "base.jsonl", {"a": 1, "cpu_affinity": [0]}, {"a": 2, "b": "x"})
    new = lines_with(tmp_path / "new.jsonl", {"a": 2, "cpu_affinity": [1]}, {"a": 1, "b": "y"})
    (difference,) = settings_differences([base], [new])
    assert (difference.name, difference.base, difference.new) == ("b", ('"x"',), ('"y"',))
    older = tmp_path / "older.jsonl"
    append_line(older, {"model": {"model_name": "m"}, "environment": {}})
    assert settings_differences([older], [new]) is None  # lines from before the record
    assert settings_differences([base], [base]) == []


@pytest.mark.e2e
def test_compare_names_the_settings_two_real_runs_differ_in(tmp_path, capsys):
    def run(name: str, *flags: str) -> Path:
        out = tmp_path / name
        command = [sys.executable, "experiment_runner.py", "--suite-name=builtin",
                   "--accelerator=cpu", "--xla=None", "--dynamo=None", "--test=eval",
                   "--repeat=2", "-k", "^mlp$", "--output-dirname", str(out), *TEST_RUN_FLAGS,
                   *flags]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env=cli_environment())
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return out / "results.jsonl"

    base = run("base")
    # Settings that leave the experiment the same one (a matmul precision would make it
    # another: then compare has no experiment in common, and names no setting).
    new = run("new", "--threads=2")
    (line,) = [json.loads(text) for text in new.read_text().splitlines()]
    assert line["environment"]["torch_settings"]["num_threads"] == 2
    # The subject is the settings, not the gate: two threads on this 2-core machine beside the
    # suite's other workers can time slower (the gate once said REGRESSED at +87%).
    no_gate = ["--threshold=900%", "--geomean-threshold=900%"]
    assert compare_main([str(base), str(new), *no_gate]) == 0
    out = capsys.readouterr().out
    named = out.split("settings differ between the experiments compared: ")[1].splitlines()[0].split(", ")
    assert {"num_threads"} <= set(named)
    assert "cpu_affinity" not in named
    assert "Settings that differ" in out
    assert compare_main([str(base), str(base)]) == 0
    assert "0 settings differ between the experiments compared" in capsys.readouterr().out
