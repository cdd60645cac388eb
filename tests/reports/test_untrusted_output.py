"""What the reports write and print from lines they cannot trust, and what compare's verdict
means (issue 54: defects 13 to 15 and 17 to 20, and the rough edges of the reports)."""

from __future__ import annotations

import csv
import io
import json
import logging
import shlex
import subprocess
import sys

import pytest

import experiment_runner
from core.text import PrintableFormatter, printable
from reports import cli
from reports.cli import compare_main, report_main, score_main
from tests.conftest import PROJECT_ROOT, cli_environment
from tests.reports.conftest import craft_line


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def test_a_carriage_return_in_a_model_name_stays_in_its_cell(write_results, tmp_path):
    # Defect 13: "\r" was written unquoted: readers split the row there, and "=1+1" after it
    # started a cell the formula guard never saw.
    lines = [craft_line("mlp", stack, times=[0.01, 0.01], code="PASS") for stack in ("eager", "inductor")]
    for line in lines:
        line["model"]["model_name"] = "evil\r=1+1"
    path = write_results(lines)
    out = tmp_path / "out"
    assert report_main([str(path), "--output-dir", str(out), "--quiet"]) == 0
    (performance,) = (out / "hud").glob("*_performance.csv")
    for text, column in ((out / "report.csv").read_text(), "model"), (performance.read_text(), "name"):
        rows = _rows(text)
        header, body = rows[0], rows[1:]
        assert all(len(row) == len(header) for row in body), body
        names = [row[header.index(column)] for row in body]
        assert names and all(name == "evil\n=1+1" for name in names)
        assert not any(cell.startswith("=") for row in body for cell in row)


@pytest.mark.parametrize("name", ["=HYPERLINK(\"http://x\")", "+1", "-2+3", "@SUM(A1)"])
def test_hud_csv_cells_that_would_start_a_formula_are_quoted(write_results, tmp_path, name):
    # Defect 14: report.csv guarded them, the HUD CSV did not.
    lines = [craft_line("mlp", stack, times=[0.01, 0.01], code="PASS") for stack in ("eager", "inductor")]
    for line in lines:
        line["model"]["model_name"] = name
    path = write_results(lines)
    assert report_main([str(path), "--hud-csv", str(tmp_path / "hud"), "--quiet"]) == 0
    files = sorted((tmp_path / "hud").glob("*.csv"))
    assert [f.name.rsplit("_", 1)[1] for f in files] == ["accuracy.csv", "performance.csv"]
    for file in files:
        header, row = _rows(file.read_text())
        assert row[header.index("name")] == "'" + name
        assert float(row[header.index("batch_size")]) >= 0  # numbers stay numbers


FORGED = "mlp\nINFO: every experiment passed\x1b[2J\u202etxt.exe"


def test_control_characters_never_reach_the_console(write_results, tmp_path, capsys):
    # Defect 15: a newline, an escape or a bidi override in a model name or a path was
    # printed as it is: a model name could forge an INFO: line.
    line = craft_line("mlp", times=[0.01, 0.01])
    line["model"]["model_name"] = FORGED
    path = write_results([line, "{broken"], name="evil\nINFO: forged.jsonl")
    assert report_main([str(path), "--csv", str(tmp_path / "r.csv")]) == 0
    captured = capsys.readouterr()
    for text in (captured.out, captured.err):
        assert "\nINFO:" not in text and "\x1b" not in text and "\u202e" not in text
    assert "builtin/mlp\\nINFO: every" in captured.out  # clipped on the terminal
    assert FORGED.replace("\r", "\n") in (tmp_path / "r.csv").read_text()  # the CSV keeps it
    assert "evil\\nINFO: forged.jsonl line 2" in captured.out
    base = write_results([line])
    assert compare_main([str(base), str(path)]) == 0
    assert "\nINFO:" not in capsys.readouterr().out


def test_printable_and_the_log_formatter():
    assert printable("a\nb\rc\td\x00\x7f\x85\u202e\u2066\ufeff") == "a\\nb\\rc\\td\\x00\\x7f\\x85\\u202e\\u2066\\ufeff"
    assert printable("caf\u00e9 \u4e2d") == "caf\u00e9 \u4e2d"  # printable text stays as it is
    assert printable(b"results-\xff.jsonl") == "results-\\xff.jsonl"
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "running %s in %s", (FORGED, "dir\n"), None)
    shown = PrintableFormatter("%(levelname)s: %(message)s").format(record)
    assert "\n" not in shown and shown.startswith("INFO: running mlp\\nINFO:")
    assert record.args == (FORGED, "dir\n")  # the record itself is left as it was


def test_a_newer_schemas_line_with_an_unknown_identity_field_is_not_this_versions(write_results, capsys):
    # Defect 17: the newer line (500 ms) replaced this version's (40 ms); compare exited 1.
    ours = craft_line("mlp", times=[0.04, 0.04], timestamp=100.0)
    newer = json.loads(json.dumps(craft_line("mlp", times=[0.5, 0.5], timestamp=200.0, run_id="newer")))
    newer["schema_version"] = 3
    newer["experiment"]["sparsity"] = "2:4"
    path = write_results([ours, newer])
    assert report_main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "40 ms" in out and "500 ms" not in out
    assert "line 2: written by a newer version (schema 3)" in out and "experiment.sparsity" in out
    base = write_results([craft_line("mlp", times=[0.04, 0.04])])
    assert compare_main([str(base), str(path)]) == 0
    # Without an unknown field, a newer line is read as any other.
    del newer["experiment"]["sparsity"]
    path = write_results([ours, newer])
    assert report_main([str(path)]) == 0
    assert "500 ms" in capsys.readouterr().out


def _settings(line: dict, **settings) -> dict:
    line["environment"] = {"torch_settings": {"num_threads": 2, **settings}}
    return line


def test_compare_names_only_the_settings_of_experiments_it_compared(write_results, capsys):
    # Defect 18: PJRT lines only in BASE made 3 settings "differ".
    base = write_results([
        _settings(craft_line("mlp", "eager", times=[0.01, 0.01])),
        _settings(craft_line("mlp", "inductor", times=[0.01, 0.01])),
        _settings(craft_line("mlp", "PJRT", times=[0.01, 0.01]), xla_matmul_precision="highest"),
    ])
    new = write_results([_settings(craft_line("mlp", stack, times=[0.01, 0.01]))
                         for stack in ("eager", "inductor")])
    assert compare_main([str(base), str(new)]) == 0
    out = capsys.readouterr().out
    assert "0 settings differ between the experiments compared" in out
    assert "xla_matmul_precision" not in out
    changed = write_results([_settings(craft_line("mlp", "eager", times=[0.01, 0.01]), num_threads=8)])
    compare_main([str(base), str(changed), "--no-cache"])
    assert "1 settings differ between the experiments compared: num_threads" in capsys.readouterr().out


@pytest.mark.parametrize("given, value", [("7%", 0.07), ("0.07", 0.07), ("0.5%", 0.005), ("0", 0.0)])
def test_threshold_spellings(given, value):
    assert cli.compare_parser().parse_args(["a", "b", "--threshold", given]).threshold == pytest.approx(value)


@pytest.mark.parametrize("given", ["7", "1", "30"])
def test_a_bare_threshold_of_one_or_more_is_refused(write_results, capsys, given):
    # Defect 19: --threshold 7 meant 700%: a gate that never fires.
    path = write_results([craft_line("mlp", times=[0.01])])
    assert compare_main([str(path), str(path), "--threshold", given]) == 2
    err = capsys.readouterr().err
    assert f"'{given}' is ambiguous: write {given}%" in err
    help_text = cli.compare_parser().format_help()
    assert "percentage (7%)" in help_text and "fraction (0.07)" in help_text and "ambiguous" in help_text


def test_the_trend_joins_only_runs_that_share_experiments(write_results, tmp_path, capsys):
    # Defect 20: a timm run and a Hugging Face run were drawn as one series, 1.31x -> 0.95x.
    def run(models, run_id, at, speed):
        lines = []
        for model in models:
            lines.append(craft_line(model, "eager", times=[0.1, 0.1], run_id=run_id, timestamp=at))
            lines.append(craft_line(model, "inductor", times=[0.1 / speed] * 2, run_id=run_id, timestamp=at))
        return lines
    path = write_results([*run(["mlp", "cnn"], "first", 1.0e9, 1.31),
                          *run(["transformer_block"], "second", 1.1e9, 0.95),
                          *run(["transformer_block"], "third", 1.2e9, 1.0)])
    assert report_main([str(path), "--html", str(tmp_path / "r.html")]) == 0
    out = capsys.readouterr().out
    trend = out[out.index("Trend:"):]
    row = next(line for line in trend.splitlines() if line.startswith("cpu inductor eval fp32 "))
    assert row.count("not comparable: no experiment in common") == 1
    second, third = row.split("0.95x")[1], row.split("0.95x")[1].split("1.00x")[1]
    assert second.lstrip().startswith("(not comparable") and "not comparable" not in third
    html = (tmp_path / "r.html").read_text()
    assert '"breaks": [[1, ' in html or '"breaks":[[1,' in html


def test_compare_exit_codes_one_per_outcome(write_results, monkeypatch, capsys):
    base = write_results([craft_line("mlp", times=[0.01] * 5)])
    same = write_results([craft_line("mlp", times=[0.01] * 5)])
    slower = write_results([craft_line("mlp", times=[0.02] * 5)])
    other = write_results([craft_line("cnn", times=[0.01] * 5)])
    failed = write_results([craft_line("mlp", status="failed", code="VERIFIER_DIDNT_RUN", error="boom")])
    assert compare_main([str(base), str(same)]) == cli.EXIT_OK == 0
    assert compare_main([str(base), str(slower)]) == cli.EXIT_REGRESSED == 1
    assert compare_main([str(base), str(base), "--alpha", "7"]) == cli.EXIT_BAD_INPUT == 2
    assert compare_main([str(base), str(other)]) == cli.EXIT_NOTHING_COMPARABLE == 3
    assert compare_main([str(failed), str(failed)]) == 3  # in common, but ran on neither side
    assert "verdict: nothing to compare (exit 3)" in capsys.readouterr().out
    monkeypatch.setattr(cli, "compare", lambda *a, **k: 1 / 0)  # a bug: never read as a regression
    assert compare_main([str(base), str(slower)]) == cli.EXIT_FAILED == 4
    assert "could not finish (ZeroDivisionError" in capsys.readouterr().err


def _unreliable(line: dict) -> dict:
    line["summary"]["unreliable"] = True
    line["summary"]["unreliable_reasons"] = ["contention"]
    return line


def test_unreliable_changes_count_in_the_gate_only_when_asked(write_results, capsys):
    # The geometric mean counted 10 unreliable changes of 12 and said REGRESSED.
    base = write_results([craft_line(m, times=[0.01] * 5) for m in ("mlp", "cnn")])
    new = write_results([_unreliable(craft_line(m, times=[0.05] * 5)) for m in ("mlp", "cnn")])
    assert compare_main([str(base), str(new)]) == 0
    out = capsys.readouterr().out
    assert "2 unreliable change(s) left out" in out and "over 0 experiments" in out
    assert compare_main([str(base), str(new), "--count-unreliable"]) == 1
    assert "REGRESSED" in capsys.readouterr().out


def test_score_says_when_every_experiment_it_scored_is_unreliable(write_results, capsys):
    reference = write_results([craft_line(m, times=[0.01] * 3) for m in ("mlp", "cnn")])
    measured = write_results([_unreliable(craft_line(m, times=[0.01] * 3)) for m in ("mlp", "cnn")])
    assert score_main([str(measured), "--reference", str(reference)]) == 0
    assert "every one of the 2 experiments scored has unreliable timings" in capsys.readouterr().out


def _big_report(write_results) -> list[dict]:
    lines = []
    for model in ("transformer_block", "mlp", "cnn"):
        for stack in ("eager", "inductor", "PJRT+openxla"):
            line = craft_line(model, stack, times=[0.01, 0.011, 0.012], cold_start=0.5,
                              peak_host=123456789, code="VERIFIER_SKIPPED" if stack == "eager" else "PASS")
            line["summary"]["throughput"] = {"tflops": 0.2, "fraction_of_peak": None,
                                             "no_peak_reason": "no peak known for cpu device Some CPU"}
            if stack == "inductor":
                line["summary"]["paired_speedup"] = {"speedup": 1.5}
            lines.append(line)
    return lines


def test_the_terminal_report_fits_a_terminal_and_says_things_once(write_results, tmp_path, capsys):
    path = write_results(_big_report(write_results))
    assert report_main([str(path), "--csv", str(tmp_path / "r.csv")]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 160  # was about 290
    assert out.count("no peak known for cpu device") == 1
    rows = {(line.split()[0], line.split()[2]): line for line in out.splitlines()
            if line.startswith("builtin/") and len(line.split()) > 5}
    # The speedup says how it was found: p paired, u unpaired.
    assert "1.50x p" in rows[("builtin/mlp", "inductor")] and "1.00x u" in rows[("builtin/mlp", "PJRT+openxla")]
    # Eager compiles nothing: no compile time.
    header = next(line for line in out.splitlines() if line.startswith("model ") and "compile" in line)
    at = header.index(" compile ") + 1
    assert rows[("builtin/mlp", "eager")][at:].startswith("- ")
    assert rows[("builtin/mlp", "inductor")][at:].startswith("489 ms")
    summary = out[out.index("Configurations"):out.index("Experiments")]
    (eager_summary,) = [line for line in summary.splitlines() if line.startswith("cpu eager eval fp32")]
    assert "489 ms" not in eager_summary and "489 ms (3/3)" in summary


def test_a_mistyped_command_gets_a_suggestion(capsys):
    assert experiment_runner.main(["reprot", "results.jsonl"]) == 2
    assert "did you mean 'report'?" in capsys.readouterr().err
    assert cli.main(["comapre"]) == 2
    assert "did you mean 'compare'?" in capsys.readouterr().err


def test_boolean_times_are_not_one_second(write_results, capsys):
    from core.files.results_file import read_results

    odd = craft_line("cnn", times=[0.01, 0.01])
    odd["metrics"]["per_iter_time"] = [True, True, True]
    path = write_results([craft_line("mlp", times=[0.01, 0.01]), odd])
    assert report_main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "line 2: its metrics.per_iter_time holds true or false" in out and "1 s" not in out
    assert [b.lineno for b in read_results(path).bad_lines] == [2]  # the runner's reading too


def test_keys_given_twice_read_the_same_in_the_runner_and_the_report(write_results, capsys):
    from core.files.results_file import read_results

    line = json.dumps(craft_line("mlp", times=[0.25, 0.25]))
    twice = line.replace('"status": "ok"', '"status": "ok", "status": "failed"')
    assert twice != line
    path = write_results([twice])
    assert read_results(path).lines[0]["status"] == "ok"  # the first value, as DuckDB reads it
    assert report_main([str(path)]) == 0
    assert "250 ms" in capsys.readouterr().out


def test_schema_version_null_is_a_bad_line_as_the_runner_reads_it(write_results, capsys):
    from core.files.results_file import read_results

    line = json.dumps(craft_line("cnn", times=[0.01]))
    odd = line.replace('"schema_version": 2', '"schema_version": null')
    path = write_results([craft_line("mlp", times=[0.01]), odd])
    assert [b.lineno for b in read_results(path).bad_lines] == [2]
    for cached in ([], ["--no-cache"]):
        assert report_main([str(path), *cached]) == 0
        out = capsys.readouterr().out
        assert f"skipped {path} line 2: its schema_version is null" in out and "builtin/cnn" not in out


@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_file_of_json_objects_that_are_no_results_lines_is_an_error(write_results, capsys, command):
    path = write_results(['{"name": "mlp", "time": 0.1}', '{"name": "cnn", "time": 0.2}'])
    good = write_results([craft_line("mlp", times=[0.01])])
    argv = [str(path)] if command == "report" else [str(good), str(path)]
    assert (report_main if command == "report" else compare_main)(argv) == 2
    assert f"{path} holds no results line" in capsys.readouterr().err


# Reports over files and lines that are not what they claim (issue 43).

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


# The report commands under a file-size limit (`ulimit -f`), as a full disk leaves them:
# the cache is only a slower read, and a scratch file that cannot be written is the machine's
# trouble, never the results file's (issue 54, defect 7).
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


@pytest.mark.e2e
def test_a_cache_that_cannot_be_written_reads_without_it(results, tmp_path):
    done = _limited("report", str(results), "--cache-dir", str(tmp_path / "cache"))
    assert done.returncode == 0, done.stderr
    assert "250 ms" in done.stdout and "500 ms" in done.stdout
    assert "the reports' cache cannot be written" in done.stderr
    assert "cannot read results file" not in done.stderr and "Traceback" not in done.stderr
    compared = _limited("compare", str(results), str(results), "--cache-dir", str(tmp_path / "cache"))
    assert compared.returncode == 0, compared.stderr


@pytest.mark.e2e
def test_no_cache_scratch_that_cannot_be_written_is_the_machines_trouble(results):
    # The details of the lines selected are read again from a scratch copy of them.
    done = _limited("report", str(results), "--no-cache")
    assert done.returncode == 4, done.stderr
    assert "cannot write the reports' scratch files" in done.stderr and "TMPDIR" in done.stderr
    assert "Traceback" not in done.stderr and "cannot read results file" not in done.stderr
