"""experiment_runner.py, the entry point: how it ends."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import PROJECT_ROOT

pytestmark = pytest.mark.e2e  # a Python process of its own (tests/conftest.py)

SIGNALS_AT_THE_END = f"""
import os, signal, sys
sys.path.insert(0, {str(PROJECT_ROOT)!r})
import experiment_runner
if sys.argv[1] == "held":
    experiment_runner.hold_stop_signals()
for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(number, signal.SIG_DFL)  # as Python leaves them while it shuts down
    os.kill(os.getpid(), number)
print("exited with its status")
"""


def test_stop_signals_after_the_run_no_longer_kill_the_runner():
    # A Ctrl-C that lands once the run is over (its handlers gone while the interpreter shuts
    # down) used to end the runner by the signal (-2) instead of with its status.
    held = subprocess.run([sys.executable, "-c", SIGNALS_AT_THE_END, "held"],
                          capture_output=True, text=True, timeout=60)
    assert held.returncode == 0 and held.stdout.strip() == "exited with its status", held
    let_through = subprocess.run([sys.executable, "-c", SIGNALS_AT_THE_END, "let"],
                                 capture_output=True, text=True, timeout=60)
    assert let_through.returncode == -2  # the same signals, not held: killed by the first
