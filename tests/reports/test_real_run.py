"""Reports on a results file written by a real runner invocation (eager and inductor on CPU)."""

import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from reports.cli import compare_main, report_main, score_main
from core.results_file import append_line
from core.schema import timed_values
from tests.conftest import TEST_RUN_FLAGS, cli_environment

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def real_results(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("real-run")
    command = [
        sys.executable, "experiment_runner.py", "--suite-name=builtin", "--accelerator=cpu",
        "--xla=None", "--dynamo=None", "--dynamo=inductor", "--test=eval", "--repeat=3", "-k", "mlp",
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
    assert set(medians) == {"eager", "inductor"}
    assert report_main([str(real_results), "--output-dir", str(tmp_path)]) == 0
    assert "cpu inductor eval fp32" in capsys.readouterr().out
    rows = {r["stack"]: r for r in csv.DictReader((tmp_path / "report.csv").open())}
    assert rows.keys() == {"eager", "inductor"}
    assert all(r["status"] == "ok" for r in rows.values())
    # Inductor was timed interleaved with eager in its own child: that paired speedup wins
    # over the ratio of the two children's medians.
    inductor = next(line for line in lines if line["experiment"]["dynamo"])
    assert float(rows["inductor"]["speedup"]) == pytest.approx(
        inductor["summary"]["paired_speedup"]["speedup"])
    assert float(rows["inductor"]["cold_start_time_s"]) > 0
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
        line["run_id"], line["timestamp"] = "later", line["timestamp"] + 1000
        append_line(slower, line)
    assert compare_main([str(real_results), str(slower)]) == 1
    assert "regressed" in capsys.readouterr().out
    assert score_main([str(slower), "--reference", str(real_results)]) == 0
    assert "score: 666.7" in capsys.readouterr().out
