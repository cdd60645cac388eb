"""benchmarks/fidelity.sh's harness side: each harness stream on its GPU and its own cores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

ROOT = Path(__file__).resolve().parents[2]

# Stands in for the harness's huggingface.py: writes where it ran, and whether its
# common.timed was wrapped to start on the fastest core, instead of a CSV.
FAKE_HARNESS = '''
import os, sys
import common
output = sys.argv[sys.argv.index("--output") + 1]
cores = ",".join(str(core) for core in sorted(os.sched_getaffinity(0)))
wrapped = hasattr(common.timed, "__wrapped__")
with open(output, "w") as file:
    file.write(f"{os.environ.get('CUDA_VISIBLE_DEVICES')};{cores};{wrapped};"
               f"{' '.join(sys.argv[1:])}\\n")
'''


@pytest.fixture
def fake_harness(tmp_path):
    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "huggingface.py").write_text(FAKE_HARNESS)
    (harness / "common.py").write_text("def timed(*args, **kwargs):\n    return 0.0\n")
    return harness


def run_fake_harness(harness, out, cases, **variables):
    environment = {**os.environ, "TOOLS": "harness", "PYTHON": sys.executable,
                   "PYTHONPATH": str(ROOT), **variables}
    return subprocess.run(["bash", str(ROOT / "benchmarks" / "fidelity.sh"), str(harness),
                           str(out), str(cases)], env=environment, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to split")
def test_harness_streams_run_on_their_gpus_and_disjoint_cores(fake_harness, tmp_path):
    harness = fake_harness
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n"
                     "huggingface ModelB 8 bf16 default eval\n")
    out = tmp_path / "out"
    run_fake_harness(harness, out, cases, HARNESS_GPUS="4,6")
    ran = {}
    for model in ("ModelA", "ModelB"):
        device, cores, _, _ = (out / f"peer-huggingface-{model}-bs8-bf16-default-eval.csv") \
            .read_text().strip().split(";")
        ran[model] = (device, set(cores.split(",")))
    assert ran["ModelA"][0] == "4" and ran["ModelB"][0] == "6"
    assert ran["ModelA"][1] and ran["ModelB"][1]
    assert not ran["ModelA"][1] & ran["ModelB"][1]
    # Each case's start and end, for benchmarks/sweep_cost.py.
    for model in ("ModelA", "ModelB"):
        start, end = map(float, (out / f"peer-huggingface-{model}-bs8-bf16-default-eval.wall")
                         .read_text().split())
        assert 0 <= end - start < 120


@pytest.mark.parametrize("timing_core, wrapped", [(None, "False"), ("fastest", "True"),
                                                   ("any", "False")])
def test_the_harness_runs_plainly_unless_told_fastest(fake_harness, tmp_path,
                                                               timing_core, wrapped):
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n")
    out = tmp_path / "out"
    variables = {"TIMING_CORE": timing_core} if timing_core else {}
    completed = run_fake_harness(fake_harness, out, cases, **variables)
    written = (out / "peer-huggingface-ModelA-bs8-bf16-default-eval.csv").read_text()
    assert written.strip().split(";")[2] == wrapped, completed.stderr[-2000:]


def test_an_unknown_timing_core_is_named_with_a_non_zero_exit(fake_harness, tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n")
    completed = run_fake_harness(fake_harness, tmp_path / "out", cases, TIMING_CORE="slowest")
    assert completed.returncode == 2 and "'slowest'" in completed.stderr


def test_each_case_reaches_the_harness_with_its_precision_test_batch_and_mode(fake_harness,
                                                                              tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 4 fp32 default train\n"
                     "huggingface ModelA 1 fp16 cudagraphs eval\n"
                     "huggingface ModelB 2 fp64 default eval\n")
    out = tmp_path / "out"
    completed = run_fake_harness(fake_harness, out, cases, TIMING_CORE="any")
    first = (out / "peer-huggingface-ModelA-bs4-fp32-default-train.csv").read_text()
    second = (out / "peer-huggingface-ModelA-bs1-fp16-cudagraphs-eval.csv").read_text()
    first_flags, second_flags = (text.strip().split(";")[3].split() for text in (first, second))
    assert first_flags[first_flags.index("--batch-size") + 1] == "4"
    assert {"--float32", "--training", "--disable-cudagraphs"} <= set(first_flags)
    assert {"--float16", "--inference"} <= set(second_flags)
    assert "--disable-cudagraphs" not in second_flags
    assert "not a case: huggingface ModelB 2 fp64" in completed.stderr
    assert not list(out.glob("peer-huggingface-ModelB-*"))


# Stands in for the Python that runs our runner: records a sweep's arguments instead of running
# it; anything else (listing the suite's models, splitting the cores) runs for real.
RECORDING_PYTHON = '''#!/usr/bin/env bash
for argument in "$@"; do
  if [ "$argument" = "--no-progress" ]; then printf '%s\\n' "$@" > "{record}"; exit 0; fi
done
exec "{python}" "$@"
'''


def test_our_flags_reach_our_runner_after_its_own(tmp_path):
    record = tmp_path / "arguments.txt"
    python = tmp_path / "python"
    python.write_text(RECORDING_PYTHON.format(record=record, python=sys.executable))
    python.chmod(0o755)
    cases = tmp_path / "cases.txt"
    cases.write_text("timm mobilenetv2_100 8 amp default eval\n")
    environment = {**os.environ, "TOOLS": "ours", "PYTHON": str(python),
                   "PYTHONPATH": str(ROOT), "OUR_FLAGS": "--processes=5 --process-caches=fresh"}
    completed = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "fidelity.sh"), str(tmp_path / "harness"),
         str(tmp_path / "out"), str(cases)],
        env=environment, capture_output=True, text=True, timeout=120)
    arguments = record.read_text().split("\n")
    assert "--processes=5" in arguments and "--process-caches=fresh" in arguments, \
        completed.stderr[-2000:]
    assert arguments.index("--process-caches=fresh") > arguments.index("--repeat=30")
    assert "--batch-size=8" in arguments and "-k" in arguments
    start, end, gpus = (tmp_path / "out" / "ours-timm-bs8-amp-default-eval.wall").read_text().split()
    assert 0 <= float(end) - float(start) < 120 and gpus == "1"
    # The launching thread where TIMING_CORE puts the harness's (the scheduler by default), unless
    # OUR_FLAGS says otherwise (given after, so it wins).
    assert arguments.index("--timing-core=any") < arguments.index("--processes=5")
