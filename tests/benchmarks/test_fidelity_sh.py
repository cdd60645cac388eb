"""benchmarks/fidelity.sh's harness side: each harness stream on its GPU and its own cores."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

ROOT = Path(__file__).resolve().parents[2]

# Stands in for the harness's huggingface.py: writes where it ran instead of a CSV.
FAKE_HARNESS = '''
import os, sys
output = sys.argv[sys.argv.index("--output") + 1]
cores = ",".join(str(core) for core in sorted(os.sched_getaffinity(0)))
with open(output, "w") as file:
    file.write(f"{os.environ.get('CUDA_VISIBLE_DEVICES')};{cores}\\n")
'''


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to split")
def test_harness_streams_run_on_their_gpus_and_disjoint_cores(tmp_path):
    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "huggingface.py").write_text(FAKE_HARNESS)
    cases = tmp_path / "cases.txt"
    cases.write_text("huggingface ModelA 8 bf16 default eval\n"
                     "huggingface ModelB 8 bf16 default eval\n")
    out = tmp_path / "out"
    environment = {**os.environ, "TOOLS": "harness", "HARNESS_GPUS": "4,6",
                   "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    subprocess.run(["bash", str(ROOT / "benchmarks" / "fidelity.sh"), str(harness), str(out),
                    str(cases)], env=environment, capture_output=True, text=True, timeout=120)
    ran = {}
    for model in ("ModelA", "ModelB"):
        device, cores = (out / f"peer-huggingface-{model}-bf16-default-eval.csv").read_text() \
            .strip().split(";")
        ran[model] = (device, set(cores.split(",")))
    assert ran["ModelA"][0] == "4" and ran["ModelB"][0] == "6"
    assert ran["ModelA"][1] and ran["ModelB"][1]
    assert not ran["ModelA"][1] & ran["ModelB"][1]
