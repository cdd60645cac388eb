"""benchmarks/sweep_cost.py: a case's parts, read from a real sweep's clock readings."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.sweep_cost import PARTS, attribute, case_of, main
from core.results_file import read_results

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_the_parts_of_each_case_add_up_to_the_sweep(tmp_path, capsys):
    out = tmp_path / "out"
    start = time.time()
    subprocess.run([sys.executable, str(ROOT / "experiment_runner.py"), "--accelerator=cpu",
                    "--xla=None", "--dynamo=None", "-k", "^(mlp|cnn)$", "--test=eval",
                    "--repeat=2", "--warmup=1", "--processes=2", "--no-progress",
                    f"--output-dirname={out}"], check=True, capture_output=True, timeout=600)
    end = time.time()
    lines = read_results(out / "results.jsonl").lines
    cases = [case_of(line) for line in lines]
    assert len(cases) == 2 and all(cases)
    attribute(cases, start, end)
    for case in cases:
        assert set(case.parts) == set(PARTS) and all(v >= 0 for v in case.parts.values())
        assert case.parts["timing"] > 0 and case.parts["reference"] > 0
        assert case.parts["child"] > 0 and case.parts["build"] > 0
    # Every second of the runner's is some case's part (the clocks differ by milliseconds).
    assert sum(case.wall for case in cases) == pytest.approx(end - start, abs=0.5)
    assert main(["parts", str(out / "results.jsonl")]) == 0
    table = capsys.readouterr().out
    assert "builtin mlp eager eval fp32" in table and "| all cases |" in table


def test_a_line_without_clock_readings_is_no_case():
    assert case_of(json.loads('{"model": {"model_name": "m"}, "summary": {}}')) is None
