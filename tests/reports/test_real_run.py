"""Reports on a results file written by a real runner invocation (eager and a compiled stack
on CPU: dynamo's aot_eager, timed paired with eager in its child as inductor is; what the
reports read of a line is the same for both, and aot_eager spares the module inductor's C++
compile of the MLP)."""

import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from reports.analyse.compare import IMPROVED, UNCHANGED, UNRELIABLE, compare
from reports.cli import compare_main, report_main, score_main
from reports.read.load import load
from core.files.results_file import append_line
from core.schema import timed_values
from tests.conftest import TEST_RUN_FLAGS, cli_environment

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def real_results(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("real-run")
    command = [
        sys.executable, "experiment_runner.py", "--suite-name=builtin", "--accelerator=cpu",
        "--xla=None", "--dynamo=None", "--dynamo=aot_eager", "--test=eval", "--repeat=3", "-k", "mlp",
        "--output-dirname", str(out), *TEST_RUN_FLAGS,
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=cli_environment())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    path = out / "results.jsonl"
    assert path.exists()
    return path


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_report_on_a_real_run(real_results, tmp_path, capsys):
    lines = _lines(real_results)
    # The per-run lists lead with the cold-start run; the steady state leaves it out.
    medians = {line["experiment"]["dynamo"] or "eager": statistics.median(timed_values(line, "per_iter_time"))
               for line in lines}
    assert all(len(line["metrics"]["per_iter_time"]) == 4 for line in lines)
    assert set(medians) == {"eager", "aot_eager"}
    assert report_main([str(real_results), "--output-dir", str(tmp_path)]) == 0
    assert "cpu aot_eager eval fp32" in capsys.readouterr().out
    rows = {r["stack"]: r for r in csv.DictReader((tmp_path / "report.csv").open())}
    assert rows.keys() == {"eager", "aot_eager"}
    assert all(r["status"] == "ok" for r in rows.values())
    # The compiled stack was timed interleaved with eager in its own child: that paired
    # speedup wins over the ratio of the two children's medians.
    compiled = next(line for line in lines if line["experiment"]["dynamo"])
    assert float(rows["aot_eager"]["speedup"]) == pytest.approx(
        compiled["summary"]["paired_speedup"]["speedup"])
    assert float(rows["aot_eager"]["cold_start_time_s"]) > 0
    assert int(rows["eager"]["peak_memory_bytes"]) > 0
    assert (tmp_path / "report.html").stat().st_size > 10_000


def test_score_and_compare_on_a_real_run(real_results, tmp_path, capsys):
    assert score_main([str(real_results), "--reference", str(real_results)]) == 0
    assert "score: 1000.0 over 2 experiments" in capsys.readouterr().out
    assert compare_main([str(real_results), str(real_results)]) == 0
    # A later run of the same experiments, every repeat 1.5x slower.
    slower = tmp_path / "slower.jsonl"
    for line in _lines(real_results):
        line["metrics"]["per_iter_time"] = [t * 1.5 for t in line["metrics"]["per_iter_time"]]
        if line["summary"].get("cpu_time_ms"):  # slower code: its CPU time grew alike
            line["summary"]["cpu_time_ms"] *= 1.5
        line["run_id"], line["timestamp"] = "later", line["timestamp"] + 1000
        append_line(slower, line)
    # Counted although a loaded machine may have flagged the real lines unreliable (which
    # compare leaves out of its gate unless asked).
    assert compare_main([str(real_results), str(slower), "--count-unreliable"]) == 1
    assert "regressed" in capsys.readouterr().out
    assert score_main([str(slower), "--reference", str(real_results)]) == 0
    assert "score: 666.7" in capsys.readouterr().out


def _steady(line: dict) -> dict:
    """The line as a run on a quiet core gives it: each timed run within 1% of the median
    (the eager runs interleaved with it too), not flagged."""
    line = json.loads(json.dumps(line))
    metrics, summary = line["metrics"], line["summary"]
    for name in ("per_iter_time", "total_time", "eager_per_iter_time"):
        if name in metrics:
            cold, timed = metrics[name][:1], metrics[name][1:]
            middle = statistics.median(timed)
            metrics[name] = cold + [middle * (1 + 0.01 * i) for i in range(len(timed))]
    summary.update(unreliable=False, unreliable_reasons=[], contended=False)
    summary.pop("slow_period", None)
    return line


def _scaled(line: dict, compiled: float, eager: float) -> dict:
    """The line of a later run in which the experiment's runs took `compiled` times as long
    and the eager runs interleaved with it `eager` times."""
    line = json.loads(json.dumps(line))
    metrics, paired = line["metrics"], line["summary"]["paired_speedup"]
    for name in ("per_iter_time", "total_time"):
        metrics[name] = [t * compiled for t in metrics[name]]
    metrics["eager_per_iter_time"] = [t * eager for t in metrics["eager_per_iter_time"]]
    for name in ("speedup", "median_of_pairs"):
        paired[name] *= eager / compiled
    paired["eager_median_per_iter_time"] *= eager
    line["run_id"], line["timestamp"] = "later", line["timestamp"] + 1000
    return line


def test_compare_calls_a_change_the_whole_machine_made_unreliable(real_results, write_results,
                                                                   capsys):
    """Two runs of the same code on a shared CPU: every run of the later one 44.5% faster,
    the compiled stack's and the eager runs interleaved with it alike, and neither line
    flagged. The paired speedup is the same on both sides: the machine changed, not the
    code."""
    lines = [_steady(line) for line in _lines(real_results)]
    compiled = next(line for line in lines if line["experiment"]["dynamo"])
    eager = next(line for line in lines if not line["experiment"]["dynamo"])
    base = write_results(lines)
    machine = write_results([_scaled(compiled, 0.555, 0.555), eager])
    result = compare(load([base]).records, load([machine]).records)
    change = next(c for c in result.changes if c.base.config.stack == "aot_eager")
    assert change.change == pytest.approx(-0.445)
    assert change.verdict == UNRELIABLE and not result.improvements
    assert change.reason == "the machine changed speed: eager timed in the same child -44.5% too"
    assert {c.verdict for c in result.changes if c is not change} == {UNCHANGED}
    assert compare_main([str(base), str(machine)]) == 0
    printed = capsys.readouterr().out
    assert "unreliable" in printed and "1 unreliable change(s) left out of the verdict and the geometric mean" in printed
    # The code made faster: the compiled stack's runs 44.5% faster, the eager runs beside
    # them as before (the paired speedup grew): an improvement.
    code = write_results([_scaled(compiled, 0.555, 1.0), eager])
    result = compare(load([base]).records, load([code]).records)
    change = next(c for c in result.changes if c.base.config.stack == "aot_eager")
    assert change.verdict == IMPROVED and change.p_value <= 0.05
