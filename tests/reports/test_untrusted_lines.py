"""Reports over files and lines that are not what they claim (issue 43)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from reports.cli import compare_main, report_main
from tests.reports.conftest import craft_line

#: What a failed child's metrics.error holds: what happened first, then the child's output,
#: whose last line is a warning torch prints in every child.
SEGFAULT = ("the child was killed by SIGSEGV (segmentation fault)\nlast output of the child:\n"
            "UserWarning: ... TF32 ...\n  _C._set_float32_matmul_precision(precision)")


def test_a_failed_line_shows_what_happened_not_the_childs_last_output(write_results, tmp_path,
                                                                     capsys):
    # Defect 8: the report said "failed: _C._set_float32_matmul_precision(precision)".
    path = write_results([craft_line("mlp", status="failed", code="VERIFIER_DIDNT_RUN",
                                     error=SEGFAULT)])
    assert report_main([str(path), "--csv", str(tmp_path / "r.csv")]) == 0
    out = capsys.readouterr().out
    assert "failed: the child was killed by SIGSEGV" in out and "_C._set_float32" not in out
    [row] = csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text()))
    assert row["error"] == "the child was killed by SIGSEGV (segmentation fault)"


def test_a_bare_traceback_shows_its_exception(write_results, capsys):
    traceback = 'Traceback (most recent call last):\n  File "x.py", line 1\nRuntimeError: boom'
    path = write_results([craft_line("mlp", status="failed", code="VERIFIER_DIDNT_RUN",
                                     error=traceback)])
    assert report_main([str(path)]) == 0
    assert "failed: RuntimeError: boom" in capsys.readouterr().out


def test_compare_names_the_reason_of_a_newly_failing_experiment(write_results, capsys):
    base = write_results([craft_line("mlp", times=[0.01, 0.01])])
    new = write_results([craft_line("mlp", status="failed", code="VERIFIER_DIDNT_RUN",
                                    error=SEGFAULT)])
    compare_main([str(base), str(new)])
    out = capsys.readouterr().out
    assert "newly failing" in out and "killed by SIGSEGV" in out


@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_file_with_no_readable_line_is_an_error(write_results, capsys, caplog, command):
    # Defect 9: "line N skipped" for every line, empty tables, exit 0: a CI gate passed.
    path = write_results(["model,time", "mlp,0.1", "cnn,0.2"], name="results.jsonl")
    good = write_results([craft_line("mlp", times=[0.01])])
    argv = [str(path)] if command == "report" else [str(good), str(path)]
    main = report_main if command == "report" else compare_main
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert f"{path} holds no readable results line" in captured.err
    assert "skipped" not in caplog.text  # one message, not one per line


def test_text_cells_that_would_start_a_formula_are_quoted(write_results, tmp_path):
    line = craft_line("mlp", times=[0.01])
    line["model"]["model_name"] = "=HYPERLINK(\"http://x\")"
    line["run_id"] = "@run"
    path = write_results([line])
    assert report_main([str(path), "--csv", str(tmp_path / "r.csv"), "--quiet"]) == 0
    [row] = csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text()))
    assert row["model"] == "'=HYPERLINK(\"http://x\")" and row["run_id"] == "'@run"
    assert float(row["median_time_s"]) == pytest.approx(0.01)


@pytest.mark.parametrize("times", [[-1000.0, -1000.0], [0.0, 0.0], [1e308, 1e308]])
def test_times_no_iteration_takes_are_no_samples(write_results, capsys, times):
    base = write_results([craft_line("mlp", times=[0.01, 0.01])])
    new = write_results([craft_line("mlp", times=times)])
    assert report_main([str(new)]) == 0
    out = capsys.readouterr().out
    assert "no per-iteration times" in out and "e+03 ms" not in out and "0 ms " not in out
    compare_main([str(base), str(new)])
    assert "no valid time per iteration" in capsys.readouterr().out


@pytest.mark.parametrize("version", ["-1", str(2**80), "2.5", "0", "\"abc\"", "[2]"])
def test_a_schema_version_that_is_no_version_is_a_bad_line(write_results, capsys, version):
    line = json.dumps(craft_line("cnn", times=[0.01]))
    odd = line.replace('"schema_version": 2', f'"schema_version": {version}')
    path = write_results([craft_line("mlp", times=[0.01]), odd])
    assert report_main([str(path)]) == 0
    assert f"skipped {path} line 2: its schema_version is" in capsys.readouterr().out
