"""Numbers at the edges (issue 54, defects 8 and 9): whatever a line's inputs hold, the line
written is strict JSON (no NaN, no Infinity), and the figures that overflowed are fixed where
they are computed. No process is started."""

from __future__ import annotations

import json
import math
import time
from typing import Any, Iterator

import pytest

from core.config import ExperimentConfig, ModelConfig, RunSettings
from core.contract import ChildResult, Role
from core.files.results_file import ResultsFile, encode_line
from core.files.strict_json import NonFiniteNumber
from core.schema import Status
from runner.plan.matrix import PlannedExperiment
from runner.run.executor import ExecutorOptions, ExperimentExecutor, SweepInfo
from runner.run.process.supervision import ChildOutcome
from runner.run.record.lines import strict_line
from runner.run.record.slow_periods import ReferenceHistory, history_shape
from core.files.side_files import ShapeError

EAGER = ExperimentConfig("cpu", None, None, None, "eval", stack="eager")
MLP = PlannedExperiment(ModelConfig("builtin", "mlp"), EAGER, "eager")
TINY = 5e-324
HUGE = 1.7e308


def strict_loads(text: str) -> Any:
    """json.loads that fails on NaN and Infinity, as any strict JSON reader does."""
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} written into a results line")

    return json.loads(text, parse_constant=refuse)


class Measured(ExperimentExecutor):
    """An executor whose timing child measured with `summary` and `workload`."""

    def __init__(self, tmp_path, summary, workload):
        super().__init__(ExecutorOptions(output_dir=tmp_path / "output"), RunSettings(),
                         SweepInfo(run_id="sweep-1"))
        self.references.folder = tmp_path / "reference"
        self.summary, self.workload = summary, workload

    def time_processes(self, planned, count, slot=None, attempt=1, lender=None):
        folder = self.child_folder(planned, Role.TIME, 1, attempt)
        folder.mkdir(parents=True)
        result = ChildResult(status=Status.OK, metrics={"per_iter_time": [0.1, 0.1],
                                                         "total_time": [0.2, 0.2]},
                             summary=json.loads(json.dumps(self.summary)),
                             workload=self.workload)
        outcome = ChildOutcome(folder, returncode=0, result=result, wall_seconds=1.5,
                               peak_tree_rss_bytes=2**30)
        return outcome, [outcome]


def reference(value: float) -> dict[str, Any]:
    return {"launch_us": value, "kernel_ms": value, "host_ms": value, "device": "cpu"}


def measured_line(tmp_path, history_value: float = 4.0, reading: float = 4.0,
                  flops: Any = 10**9) -> dict[str, Any]:
    """The line the runner writes for an experiment measured against a reference history of
    `history_value`, with readings of `reading` and a workload of `flops`."""
    history = tmp_path / "reference"
    history.mkdir(exist_ok=True)
    now = time.time()
    for name in ReferenceHistory(history).folder.glob("*.json"):
        name.unlink()
    summary = {"reference": {"before": reference(reading), "after": reference(reading),
                             "during": reference(reading)},
               "cold_start_s": 0.5, "processes": {"count": 1}}
    executor = Measured(tmp_path, summary, {"flops_per_iteration": flops, "inputs": []})
    path = executor.references._path("cpu", None)
    path.write_text(json.dumps({name: [[now, history_value]] * 5
                                for name in ("launch_us", "kernel_ms", "host_ms")}))
    return executor.run(MLP).to_dict()


def figures(value: Any, where: str = "") -> Iterator[str]:
    """The path of every number a line holds."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield where
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from figures(item, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from figures(item, f"{where}[{index}]")


def set_figure(line: dict[str, Any], where: str, number: float) -> dict[str, Any]:
    changed = json.loads(json.dumps(line))
    parts = [part for chunk in where.split(".") for part in chunk.replace("]", "").split("[")]
    holder: Any = changed
    for part in parts[:-1]:
        holder = holder[int(part)] if isinstance(holder, list) else holder[part]
    last = parts[-1]
    if isinstance(holder, list):
        holder[int(last)] = number
    else:
        holder[last] = number
    return changed


def test_a_history_of_tiny_readings_makes_no_infinite_ratio(tmp_path):
    # Defect 8: a history of 5e-324 passed the shape check; the ratio overflowed and
    # "ratio": Infinity was written.
    line = measured_line(tmp_path, history_value=TINY)
    strict_loads(encode_line(line).decode())
    ratio = line["summary"]["slow_period"]["ratio"]
    assert ratio is None or math.isfinite(ratio)


def test_a_history_of_tiny_or_huge_readings_does_not_fit_its_shape():
    now = time.time()
    for value in (TINY, 1e-300, HUGE):
        with pytest.raises(ShapeError, match="not from"):
            history_shape({"launch_us": [[now, value]]})
    assert history_shape({"launch_us": [[now, 1e-9]]}) == {"launch_us": [[now, 1e-9]]}


def test_a_reading_far_off_a_tiny_usual_figure_makes_no_infinite_ratio(tmp_path):
    line = measured_line(tmp_path, history_value=1e-12, reading=HUGE)
    strict_loads(encode_line(line).decode())


def test_a_huge_flop_count_makes_no_infinite_tflops(tmp_path):
    # Defect 9: a FLOP count of 1.7e308 made TFLOP/s overflow; written as Infinity.
    line = strict_line(measured_line(tmp_path, flops=HUGE))
    written = strict_loads(encode_line(line).decode())
    throughput = written["summary"].get("throughput") or {}
    assert all(value is None or math.isfinite(value) for value in throughput.values()
               if isinstance(value, float))


def test_the_results_file_refuses_a_non_finite_number_naming_it(tmp_path):
    results = ResultsFile(tmp_path / "results.jsonl")
    with pytest.raises(NonFiniteNumber, match=r"summary\.slow_period\.ratio is inf"):
        results.append({"summary": {"slow_period": {"ratio": math.inf}}})
    with pytest.raises(NonFiniteNumber, match=r"metrics\.per_iter_time\[1\] is nan"):
        results.append({"metrics": {"per_iter_time": [0.1, math.nan]}})
    assert not results.path.exists() or results.path.read_bytes() == b""


@pytest.mark.parametrize("number", [math.inf, -math.inf, math.nan])
def test_every_figure_of_a_line_that_comes_out_non_finite_is_written_as_null_and_named(
        tmp_path, number):
    line = measured_line(tmp_path)
    paths = list(figures(line))
    # The line holds the figures of every part: times, summary, reference, throughput.
    assert {"metrics.per_iter_time[0]", "summary.slow_period.ratio", "timestamp",
            "summary.throughput.tflops", "summary.wall_time"} <= set(paths)
    results = ResultsFile(tmp_path / "results.jsonl")
    for where in paths:
        bad = set_figure(line, where, number)
        with pytest.raises(NonFiniteNumber):
            encode_line(bad)
        kept = strict_line(bad)
        results.append(kept)
        assert any(note.startswith(f"{where} came out as") for note in kept["notes"]), where
    written = results.path.read_text().splitlines()
    assert len(written) == len(paths)
    for text in written:
        strict_loads(text)
