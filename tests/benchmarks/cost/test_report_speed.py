"""benchmarks/cost/report_speed.py: the year of nights it writes, and a command timed whole."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks.cost.report_speed import CONFIGURATIONS, MODELS, Timing, generate, run_command
from core.files.results_file import read_results
from tests.reports.conftest import craft_line


def sample() -> list[dict]:
    lines = [craft_line(model, times=[1.0, 2.0, 3.0], stack=stack)
             for model in ("mlp", "cnn") for stack in ("eager", "inductor")]
    for line in lines:
        line["fingerprint"] = f"fp-{line['model']['model_name']}-{line['stack_label']}"
    return lines


def test_each_night_is_whole_and_followed_by_the_runners_refresh(tmp_path):
    path = tmp_path / "results.jsonl"
    nights: list[int] = []
    runs = generate(path, 3 * MODELS * CONFIGURATIONS, sample(),
                    after_night=lambda: nights.append(len(path.read_bytes().splitlines())))
    assert runs == 3 and nights == [MODELS * CONFIGURATIONS * n for n in (1, 2, 3)]
    read = read_results(path)
    assert len(read.lines) + len(read.bad_lines) == 3 * MODELS * CONFIGURATIONS
    assert 0 < len(read.bad_lines) < 0.02 * len(read.lines)  # about 0.5% cut short
    assert {line["run_id"] for line in read.lines} == {"night-0000", "night-0001", "night-0002"}
    assert len({(line["run_id"], line["model"]["model_name"]) for line in read.lines}) > MODELS * 2


@pytest.mark.e2e
def test_a_command_is_timed_as_a_whole_process(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in sample()))
    timing = Timing()
    for _ in range(2):
        run_command(["score", str(path), "--reference", str(path), "--no-cache"], timing)
    assert timing.codes == {0} and len(timing.wall) == 2
    assert all(wall > 0.1 for wall in timing.wall)  # Python's start and the imports count
    assert all(0 < cpu and rss > 20 for cpu, rss in zip(timing.cpu, timing.rss))
    assert re.fullmatch(r"\d+\.\d\d s \(\d+\.\d\d-\d+\.\d\d\), cpu \d+\.\d\d s, \d+ MiB", timing.cell())


@pytest.mark.e2e
def test_a_commands_peak_memory_is_its_own_not_the_benchmarks(tmp_path):
    """Linux counts the forking process's memory, up to the exec, in a child's peak RSS: the
    benchmark holding hundreds of MiB must not raise the figure of what it runs."""
    import resource

    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in sample()))
    held = bytearray(b"\x01") * (400 * 1024 * 1024)  # touched, so resident
    benchmark_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    timing = run_command(["score", str(path), "--reference", str(path), "--no-cache"], Timing())
    del held
    assert timing.codes == {0}
    assert 20 < timing.rss[0] < benchmark_peak - 300, (timing.rss, benchmark_peak)
