"""The import contracts (.importlinter) hold, and breaking them is caught."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import PROJECT_ROOT

import pytest

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

PACKAGES = ("core", "models", "verifier", "backends", "observers", "child", "runner", "reports",
            "api", "benchmarks", "bisection")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    command = [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"]
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})


def test_the_project_keeps_its_import_contracts():
    completed = lint_imports(PROJECT_ROOT)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-2000:]
    assert "0 broken" in completed.stdout


def test_an_upward_import_and_a_cycle_are_caught(tmp_path):
    for package in PACKAGES:
        shutil.copytree(PROJECT_ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__", "tables"))
    shutil.copy(PROJECT_ROOT / ".importlinter", tmp_path / ".importlinter")
    with open(tmp_path / "core" / "host" / "machine.py", "a", encoding="utf-8") as upward:
        upward.write("\nimport runner.plan.matrix  # an upward arrow\n")
    with open(tmp_path / "verifier" / "tolerance.py", "a", encoding="utf-8") as cyclic:
        cyclic.write("\nimport verifier.compare  # compare imports tolerance: a cycle\n")
    inward_path = tmp_path / "benchmarks" / "stability" / "child_output.py"
    with open(inward_path, "a", encoding="utf-8") as inward:
        inward.write("\nimport runner.run.process.supervision  # past the public interface\n")
    completed = lint_imports(tmp_path)
    assert completed.returncode != 0
    assert "runner and child above observers above backends above verifier above models above " \
        "core BROKEN" in " ".join(completed.stdout.split())
    assert "no import cycles between the modules of a package BROKEN" in completed.stdout
    assert "benchmarks use the product through api (its public interface), reports and core " \
        "only BROKEN" in " ".join(completed.stdout.split())
