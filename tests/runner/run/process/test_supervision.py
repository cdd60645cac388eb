"""runner/run/process/supervision.py: what the parent measures of a child (no process is started:
the child is a stand-in with the Popen interface)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from core.contract import RESULT_FILE
from runner.run.process.supervision import Supervisor


class ExitingChild:
    """Writes its result at once, then takes `linger` seconds to exit; its output ends at its
    exit, as a spawned interpreter's does, or, with `output_ends_first`, at once, as a forked
    child that holds no device ends it just before its exit."""

    def __init__(self, folder, linger: float, output_ends_first: bool = False) -> None:
        (folder / RESULT_FILE).write_text("{}")
        read_end, self._write_end = os.pipe()
        self.pid, self.stdout, self.returncode = 2**22 + 4321, os.fdopen(read_end, "rb"), None
        self.exits_at = time.monotonic() + linger
        self.waited = threading.Event()
        if output_ends_first:
            self._end_output()

    def _end_output(self) -> None:
        if self._write_end is not None:
            os.close(self._write_end)
            self._write_end = None

    def poll(self):
        if self.returncode is None and time.monotonic() >= self.exits_at:
            self.returncode = 0
            self._end_output()
        return self.returncode

    def wait(self, timeout=None):
        if self.poll() is None:
            time.sleep(max(0.0, min(timeout if timeout is not None else 1e9,
                                    self.exits_at - time.monotonic())))
            if self.poll() is None:
                import subprocess
                raise subprocess.TimeoutExpired("stand-in", timeout)
        self.waited.set()
        return self.returncode


def test_the_time_a_child_takes_to_exit_after_its_result_is_measured(tmp_path):
    outcome = Supervisor(600, None, False, None, threading.Event()).run(
        tmp_path, tmp_path / "scratch", lambda: ExitingChild(tmp_path, 0.6))
    assert outcome.returncode == 0
    assert 0.45 <= outcome.exit_seconds <= 0.6 + 0.5
    assert outcome.exit_seconds <= outcome.wall_seconds


def test_a_cpu_child_that_ends_its_output_after_its_result_is_done_before_its_exit(tmp_path):
    supervisor = Supervisor(600, None, False, None, threading.Event())
    children = []

    def start():
        children.append(ExitingChild(tmp_path, 0.8, output_ends_first=True))
        return children[-1]

    outcome = supervisor.run(tmp_path, tmp_path / "scratch", start, done_at_output_end=True)
    assert outcome.wall_seconds < 0.5  # the runner went on without waiting for the exit
    assert outcome.exit_seconds is not None and outcome.exit_seconds < 0.5
    assert outcome.returncode is None  # not known yet: it is still exiting
    assert not children[0].waited.is_set()
    supervisor.wait_for_exits()  # its exit is still waited for, in the background
    assert children[0].waited.is_set() and children[0].returncode == 0
    # A child that may hold a device (a GPU's memory, a TPU) is done at its exit only.
    outcome = supervisor.run(tmp_path, tmp_path / "scratch", start)
    assert outcome.returncode == 0 and outcome.wall_seconds >= 0.75


def test_a_childs_waits_for_a_shared_gpu_are_read_with_the_current_one(tmp_path):
    from core.contract import GATE_WAITS_FILE
    from runner.run.process.supervision import gpu_waits

    assert gpu_waits(tmp_path) == 0.0  # a child that never waited
    (tmp_path / GATE_WAITS_FILE).write_text("3.5 -\n")
    assert gpu_waits(tmp_path) == 3.5
    (tmp_path / GATE_WAITS_FILE).write_text(f"3.5 {time.time() - 2:.3f}\n")
    assert 5.4 <= gpu_waits(tmp_path) <= 6.5
    (tmp_path / GATE_WAITS_FILE).write_text("garbled")
    assert gpu_waits(tmp_path) == 0.0


@pytest.mark.e2e
def test_the_memory_poll_reads_the_childs_tree_and_never_scans_every_process(monkeypatch):
    """A child with a grandchild: both are found and their memory counted, with psutil's scan
    of every process on the host (its parent map) made to fail."""
    import subprocess
    import sys

    import psutil

    from runner.run.process import supervision

    grandchild = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
                  "'import sys; sys.stdin.read()'], stdin=subprocess.PIPE); "
                  "print(p.pid, flush=True); sys.stdin.read(); p.kill()")
    child = subprocess.Popen([sys.executable, "-c", grandchild], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        grandchild_pid = int(child.stdout.readline())

        def no_scan(*args, **kwargs):
            raise AssertionError("every process of the host was read")

        monkeypatch.setattr(psutil, "_ppid_map", no_scan)
        monkeypatch.setattr(psutil, "process_iter", no_scan)
        assert supervision.tree_pids(child.pid) == [child.pid, grandchild_pid]
        assert supervision.tree_rss_bytes(child.pid) >= (
            psutil.Process(child.pid).memory_info().rss
            + psutil.Process(grandchild_pid).memory_info().rss) * 0.9
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    assert supervision.tree_pids(child.pid) == []  # gone: nothing left to count
    assert supervision.tree_rss_bytes(child.pid) == 0
