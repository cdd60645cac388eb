"""PyTorch/XLA's own tools read our results file unchanged (seed 003's users keep theirs).

`result_analyzer.py` and `aggregate.py` are run as they are, from the reference folder beside
the clone (`<repo>/../shared/reference/pytorch_xla_benchmarks`; CI checks out ../shared next
to the repository), over the file of a real sweep: XLA lines (PJRT lazy tensor and openxla on
CPU), eager and inductor lines, a failed line (faults suite, `raises`) and a skipped line
(TorchBench marks the model as not implemented for train).
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from core.schema import timed_values
from reports.read.load import load
from tests.conftest import PROJECT_ROOT, CliRun, cli_command, cli_environment

PEER_TOOLS = PROJECT_ROOT.parent / "shared" / "reference" / "pytorch_xla_benchmarks"
FAKE_TORCHBENCH = PROJECT_ROOT / "tests" / "fixtures" / "fake_torchbench"
#: aggregate.py knows only these names (a100, v100, a6000); the test crafts such lines,
#: the runner never writes a name it did not read from the device.
A100 = "NVIDIA A100-SXM4-40GB"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (PEER_TOOLS / "result_analyzer.py").is_file(),
                       reason=f"PyTorch/XLA's tools are not at {PEER_TOOLS} (CI checks out "
                              "../shared beside the repository)"),
    pytest.mark.skipif(any(importlib.util.find_spec(name) is None
                           for name in ("numpy", "pandas", "scipy", "tabulate")),
                       reason="PyTorch/XLA's tools need numpy, pandas, scipy and tabulate "
                              "(the project's test extra)"),
    pytest.mark.skipif(importlib.util.find_spec("torch_xla") is None,
                       reason="the sweep's XLA lines need torch_xla (the project's xla extra)"),
]

SWEEP = ["--accelerator=cpu", "--repeat=4", "--warmup=1"]


def run(output: Path, *args: str) -> None:
    completed = subprocess.run(cli_command(output, *SWEEP, *args), capture_output=True,
                               text=True, env=cli_environment(), timeout=900)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> list[dict]:
    """One results file written by three runner invocations (three timestamps)."""
    output = tmp_path_factory.mktemp("peer") / "output"
    run(output, "--suite-name=builtin", "-k", "^mlp$", "--xla=None", "--xla=PJRT",
        "--dynamo=None", "--dynamo=openxla", "--dynamo=inductor", "--test=eval")
    run(output, "--suite-name=faults", "-k", "^raises$", "--xla=None", "--dynamo=None",
        "--test=eval")
    run(output, "--suite-name=torchbench", f"--torchbench-dir={FAKE_TORCHBENCH}",
        "-k", "^tiny_dict_eval_only$", "--xla=None", "--dynamo=None", "--test=train")
    lines = CliRun(0, "", "", output).lines()
    assert [(l["stack_label"], l["status"]) for l in lines] == [
        ("eager", "ok"), ("inductor", "ok"), ("PJRT", "ok"), ("PJRT+openxla", "ok"),
        ("eager", "failed"), ("eager", "skipped")]
    return lines


def peer(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PEER_TOOLS / script), *args], capture_output=True,
                          text=True, timeout=300, cwd=str(PEER_TOOLS))


def analyze(lines: list[dict], folder: Path, output_format: str) -> Path:
    """Run result_analyzer.py over a folder holding `lines`; the report it wrote."""
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    done = peer("result_analyzer.py", f"--output-dirname={folder}",
                f"--database={folder / 'database.csv'}", f"--output-format={output_format}")
    assert done.returncode == 0, done.stderr[-3000:]
    return folder / f"metric_report.{output_format}"


def key(line: dict) -> tuple:
    experiment = line["experiment"]
    return (line["model"]["model_name"], experiment["xla"], experiment["dynamo"])


def test_every_line_keeps_the_peer_layout(sweep):
    timestamps = []
    for line in sweep:
        assert line["experiment"]["accelerator_model"], line["stack_label"]
        timestamps.append(line["timestamp"])
        for name, value in line["metrics"].items():
            assert isinstance(value, list) or (name == "error" and isinstance(value, str)), name
        assert line["finished_at"] >= line["timestamp"]
    assert len(set(timestamps)) == 3  # one per runner invocation, as PyTorch/XLA's runner
    ok = [l for l in sweep if l["status"] == "ok"]
    for line in ok:
        assert line["experiment"]["batch_size"] == 16 and line["experiment"]["requested_batch_size"] is None
        assert line["summary"]["cold_start_entries"] == 1
        assert line["metrics"]["total_time"][0] == line["summary"]["cold_start_time"]
        assert len(line["metrics"]["total_time"]) == line["repeat"] + 1
    assert sweep[-1]["metrics"] == {"error": "SKIP"} and sweep[-1]["skip_reason"]
    assert "raises" in sweep[-2]["metrics"]["error"]


def test_result_analyzer_reads_every_line_with_our_medians_batch_sizes_and_compile_times(
        sweep, tmp_path):
    with analyze(sweep, tmp_path / "csv", "csv").open() as report:
        rows = list(csv.DictReader(report))
    assert len(rows) == len(sweep)  # one row per line, failed and skipped included
    ours_file = tmp_path / "ours.jsonl"
    ours_file.write_text("".join(json.dumps(line) + "\n" for line in sweep))
    records = {(r.model, r.config.stack): r for r in load([ours_file]).records}
    figures = {}
    for line, row in zip(sweep, rows):
        assert (row["model_name"], row["accelerator_model"]) == (
            line["model"]["model_name"], line["experiment"]["accelerator_model"])
        if line["status"] != "ok":
            expected = "SKIP" if line["status"] == "skipped" else line["metrics"]["error"]
            assert row["error_message"] == expected and row["median_total_time"] == ""
            continue
        assert int(float(row["batch_size"])) == line["experiment"]["batch_size"] == 16
        # The analyzer's medians are of the whole lists (the cold-start run leads them), and
        # still land among our timed runs: the cold start does not move the median.
        for metric in ("total_time", "per_iter_time"):
            median = float(row[f"median_{metric}"])
            assert median == pytest.approx(statistics.median(line["metrics"][metric]))
            timed = timed_values(line, metric)
            assert min(timed) <= median <= max(timed)
        # Its compile time, max(total_time) - median(total_time), is our cold start less
        # the steady state (the reports' compile time) within 10%.
        ours = records[(line["model"]["model_name"], line["stack_label"])].compile_time
        column = "xla_compile_time" if line["experiment"]["xla"] else "dynamo_compile_time"
        theirs = float(row[column])
        stack = line["stack_label"]
        figures[stack] = (float(row["median_per_iter_time"]), theirs, ours)
        if stack == "eager":
            assert float(row["xla_compile_time"]) == float(row["dynamo_compile_time"]) == -1
            continue
        assert ours > 0 and theirs == pytest.approx(ours, rel=0.10), (stack, theirs, ours)
    print("\nanalyzer: stack, median per-iteration time, compile time (analyzer, ours)")
    for stack, (median, theirs, ours) in figures.items():
        print(f"  {stack}: {median * 1e3:.3f} ms, {theirs:.3f} s vs {ours:.3f} s")


def test_result_analyzer_jsonl_marks_failures_and_keeps_the_dimensions(sweep, tmp_path):
    report = analyze(sweep, tmp_path / "jsonl", "jsonl")
    runs = [json.loads(text) for text in report.read_text().splitlines()]
    assert [r["dimensions"]["run_status"] for r in runs] == [
        "success", "success", "success", "success", "failure", "failure"]
    for line, analyzed in zip(sweep, runs):
        assert analyzed["metrics"]["timestamp"] == int(line["timestamp"])
        assert analyzed["dimensions"]["accelerator_model"] == line["experiment"]["accelerator_model"]
    assert runs[-1]["error_message"] == "SKIP"


def compile_time(line: dict) -> float:
    total = line["metrics"]["total_time"]
    return total[0] - statistics.fmean(total[1:])


def crafted_a100(sweep: list[dict]) -> list[dict]:
    """The sweep's timed lines as if an A100 had run them (aggregate.py's known names)."""
    crafted = []
    for line in sweep:
        if line["status"] == "ok":
            line = json.loads(json.dumps(line))
            line["experiment"]["accelerator_model"] = A100
            crafted.append(line)
    return crafted


def aggregate(path: Path, *args: str) -> list[list[str]]:
    done = peer("aggregate.py", str(path), "--accelerator=a100", "--test=inference",
                "--format=csv", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return list(csv.reader(io.StringIO(done.stdout)))


def test_aggregate_groups_by_the_sweep_timestamp_and_reads_compile_and_run_times(sweep, tmp_path):
    path = tmp_path / "a100.jsonl"
    lines = crafted_a100(sweep)
    path.write_text("".join(json.dumps(l) + "\n" for l in lines))
    by_stack = {l["stack_label"]: l for l in lines}

    header, *rows = aggregate(path, "--report=speedup", "--metric=compile")
    assert header[0].startswith("# Datetime") and len(rows) == 1  # one sweep, one timestamp
    inductor, openxla = float(rows[0][1]), float(rows[0][3])
    assert inductor == 1.0  # the baseline over itself
    # aggregate.py's compile time is the first entry less the mean of the rest: ours.
    expected = compile_time(by_stack["inductor"]) / compile_time(by_stack["PJRT+openxla"])
    assert openxla == pytest.approx(expected, rel=1e-3)

    header, *rows = aggregate(path, "--report=speedup", "--metric=exec")
    assert len(rows) == 1 and float(rows[0][1]) == 1.0 and float(rows[0][3]) > 0

    header, *rows = aggregate(path, "--report=latest", "--backends", "inductor",
                              "openxla+dynamo", "openxla+lazytensor", "eager")
    assert {row[3] for row in rows} == {"mlp"}


def test_aggregate_refuses_a_device_it_does_not_know(sweep, tmp_path):
    # Its own limit (a100, v100, a6000): our lines name the real CPU, never a faked GPU.
    path = tmp_path / "cpu.jsonl"
    path.write_text("".join(json.dumps(l) + "\n" for l in sweep if l["status"] == "ok"))
    done = peer("aggregate.py", "--accelerator=a100", "--format=csv", str(path))
    assert done.returncode != 0 and "cannot recognize accelerator model" in done.stderr
