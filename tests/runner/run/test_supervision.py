"""runner/run/supervision.py: what the parent measures of a child (no process is started:
the child is a stand-in with the Popen interface)."""

from __future__ import annotations

import os
import threading
import time

from core.contract import RESULT_FILE
from runner.run.supervision import Supervisor


class ExitingChild:
    """Writes its result at once, then takes `linger` seconds to exit."""

    def __init__(self, folder, linger: float) -> None:
        (folder / RESULT_FILE).write_text("{}")
        read_end, write_end = os.pipe()
        os.close(write_end)
        self.pid, self.stdout, self.returncode = 2**22 + 4321, os.fdopen(read_end, "rb"), None
        self.exits_at = time.monotonic() + linger

    def poll(self):
        if self.returncode is None and time.monotonic() >= self.exits_at:
            self.returncode = 0
        return self.returncode

    def wait(self, timeout=None):
        if self.poll() is None and timeout is not None:
            time.sleep(min(timeout, max(0.0, self.exits_at - time.monotonic())))
            if self.poll() is None:
                import subprocess
                raise subprocess.TimeoutExpired("stand-in", timeout)
        return self.returncode


def test_the_time_a_child_takes_to_exit_after_its_result_is_measured(tmp_path):
    outcome = Supervisor(600, None, False, None, threading.Event()).run(
        tmp_path, tmp_path / "scratch", lambda: ExitingChild(tmp_path, 0.6))
    assert outcome.returncode == 0
    assert 0.45 <= outcome.exit_seconds <= 0.6 + 0.5
    assert outcome.exit_seconds <= outcome.wall_seconds


def test_a_childs_waits_for_a_shared_gpu_are_read_with_the_current_one(tmp_path):
    from core.contract import GATE_WAITS_FILE
    from runner.run.supervision import gpu_waits

    assert gpu_waits(tmp_path) == 0.0  # a child that never waited
    (tmp_path / GATE_WAITS_FILE).write_text("3.5 -\n")
    assert gpu_waits(tmp_path) == 3.5
    (tmp_path / GATE_WAITS_FILE).write_text(f"3.5 {time.time() - 2:.3f}\n")
    assert 5.4 <= gpu_waits(tmp_path) <= 6.5
    (tmp_path / GATE_WAITS_FILE).write_text("garbled")
    assert gpu_waits(tmp_path) == 0.0
