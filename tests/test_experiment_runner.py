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


STOP_IN_A_WEAKREF_CALLBACK = f"""
import signal, sys, time, weakref
sys.path.insert(0, {str(PROJECT_ROOT)!r})
import experiment_runner
if sys.argv[1] == "hooked":
    sys.unraisablehook = experiment_runner.redeliver_stop
if sys.argv[2] == "SIGTERM":
    from runner.run.process import signals
    signals.install()


class Lock:
    pass


def interrupted(_reference):  # where the import system's module-lock cleanup met Ctrl-C
    signal.raise_signal(getattr(signal, sys.argv[2]))


lock = Lock()
reference = weakref.ref(lock, interrupted)
try:
    del lock
    for _ in range(100):
        time.sleep(0.01)
    print("ran on")
except KeyboardInterrupt as stop:
    print("stopped", type(stop).__name__)
"""


@pytest.mark.parametrize("signal_name, stopped_by", [("SIGINT", "KeyboardInterrupt"),
                                                     ("SIGTERM", "Terminated")])
def test_a_stop_that_lands_in_a_weakref_callback_still_stops_the_runner(signal_name,
                                                                        stopped_by):
    # Seen once in `make test`: a Ctrl-C 0.05 s into a sweep landed in importlib's
    # module-lock cleanup; Python printed "Exception ignored ... KeyboardInterrupt" and the
    # sweep ran to its end.
    plain = subprocess.run([sys.executable, "-c", STOP_IN_A_WEAKREF_CALLBACK, "plain",
                            signal_name], capture_output=True, text=True, timeout=60)
    assert plain.stdout.strip() == "ran on" and "Exception ignored" in plain.stderr, plain
    hooked = subprocess.run([sys.executable, "-c", STOP_IN_A_WEAKREF_CALLBACK, "hooked",
                             signal_name], capture_output=True, text=True, timeout=60)
    assert hooked.stdout.strip() == f"stopped {stopped_by}", hooked
    assert hooked.stderr == "", hooked.stderr


def test_main_puts_back_the_hook_it_found():
    # A caller in-process (a test, a notebook) keeps its own hook for unraisable exceptions.
    code = (f"import sys; sys.path.insert(0, {str(PROJECT_ROOT)!r}); import experiment_runner\n"
            "def mine(unraisable): pass\n"
            "sys.unraisablehook = mine\n"
            "seen = []\n"
            "experiment_runner.run_command = lambda argv: seen.append(sys.unraisablehook) or 0\n"
            "assert experiment_runner.main(['report', 'x']) == 0\n"
            "print(seen[0] is experiment_runner.redeliver_stop, sys.unraisablehook is mine)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.split() == ["True", "True"], done.stderr
