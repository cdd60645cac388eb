"""benchmarks/harness_on_fast_core.py: the harness's timed runs start pinned to one core, and
its code runs otherwise unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

ROOT = Path(__file__).resolve().parents[2]
WRAPPER = ROOT / "benchmarks" / "harness_on_fast_core.py"

# Stands in for the harness's common.py: its own functions call `timed` by its global name, as
# the harness's speedup_experiment does.
FAKE_COMMON = '''
import os

def timed(model, iter_fn, inputs, return_result=False):
    return len(os.sched_getaffinity(0)), sorted(os.sched_getaffinity(0))

def main(output):
    import json
    inside = [timed(None, None, None) for _ in range(3)]
    outside = sorted(os.sched_getaffinity(0))
    with open(output, "w") as file:
        json.dump({"inside": inside, "outside": outside, "name": timed.__name__}, file)
'''

# Stands in for huggingface.py: imports common the way the harness does, then runs.
FAKE_SCRIPT = '''
import sys
try:
    from .common import main
except ImportError:
    from common import main

if __name__ == "__main__":
    main(sys.argv[sys.argv.index("--output") + 1])
'''


@pytest.fixture
def fake_harness(tmp_path):
    folder = tmp_path / "harness"
    folder.mkdir()
    (folder / "common.py").write_text(FAKE_COMMON)
    (folder / "huggingface.py").write_text(FAKE_SCRIPT)
    return folder


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pick from")
def test_each_timed_run_starts_on_one_core_of_the_set(fake_harness, tmp_path):
    output = tmp_path / "ran.json"
    completed = subprocess.run(
        [sys.executable, str(WRAPPER), str(fake_harness / "huggingface.py"), "--performance",
         "--output", str(output)], cwd=fake_harness, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    ran = json.loads(output.read_text())
    every_core = sorted(os.sched_getaffinity(0))
    for count, cores in ran["inside"]:
        assert count == 1 and cores[0] in every_core
    assert ran["name"] == "timed"  # the harness still sees its own function's name
    assert "3 timed runs started on the fastest of" in completed.stderr


def test_a_missing_script_is_named_with_a_non_zero_exit(tmp_path):
    completed = subprocess.run([sys.executable, str(WRAPPER), str(tmp_path / "nope.py")],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert "nope.py" in completed.stderr
