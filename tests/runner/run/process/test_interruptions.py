"""Interruptions and infrastructure failures are not the experiment's failures (issue 23,
items 3 and 4): a stopped runner leaves no line for what it interrupted, a lost fork server
leaves a line that resume runs again, and a SIGKILL is called out of memory only where
something saw it."""

import os
import re
import signal
import subprocess
import threading
import time

import psutil
import pytest

from core.config import ExperimentConfig, ModelConfig, RunSettings
from core.contract import ChildResult
from core.files.results_file import read_results
from core.schema import Status
from runner.plan.matrix import PlannedExperiment
from runner.plan.resume import covers
from runner.run.record.lines import SweepInfo, line_from_outcome
from runner.run.process.supervision import ChildOutcome, ExperimentCancelled, Supervisor, describe_exit
from tests.conftest import cli_command, cli_environment, end_templates

NO_SUCH_PID = 2**22 + 12345  # above pid_max's default: no process has it


class FakeChild:
    """A child that runs until the sweep is stopped, then ends killed by SIGKILL, as a child
    whose fork server died with the thread that started it did (issue 23, item 3)."""

    def __init__(self, cancelled: threading.Event, lost_reason=None) -> None:
        read_end, write_end = os.pipe()
        os.write(write_end, b"some output\n")
        os.close(write_end)
        self.pid, self.stdout, self.returncode = NO_SUCH_PID, os.fdopen(read_end, "rb", buffering=0), None
        self.cancelled, self.lost_reason_text = cancelled, lost_reason

    @property
    def lost_reason(self):
        return self.lost_reason_text if self.returncode is not None else None

    def poll(self):
        if self.cancelled.is_set() or self.lost_reason_text:
            self.returncode = -signal.SIGKILL
        return self.returncode

    def wait(self, timeout=None):
        if self.poll() is None:
            if timeout is not None:
                time.sleep(timeout)
                raise subprocess.TimeoutExpired("fake", timeout)
        return self.returncode


def supervisor(cancelled):
    return Supervisor(600, None, False, None, cancelled)


def test_a_child_that_ends_because_the_sweep_stopped_is_cancelled_not_failed(tmp_path):
    cancelled = threading.Event()
    cancelled.set()  # stopped before the watch looked: the child is already dead by then
    with pytest.raises(ExperimentCancelled):
        supervisor(cancelled).run(tmp_path, tmp_path / "scratch", lambda: FakeChild(cancelled))


def planned():
    model, experiment = ModelConfig("builtin", "mlp"), ExperimentConfig("cpu", None, None, None, "eval", stack="eager")
    return PlannedExperiment(model, experiment, "eager")


def test_a_child_lost_with_its_fork_server_gives_a_line_that_resume_retries(tmp_path):
    reason = "its fork server (pid 7) was killed by SIGKILL while it ran"
    outcome = supervisor(threading.Event()).run(
        tmp_path, tmp_path / "scratch", lambda: FakeChild(threading.Event(), reason))
    assert outcome.infrastructure_failure == reason and outcome.out_of_memory is None
    line = line_from_outcome(RunSettings(), SweepInfo("run"), planned(), outcome).to_dict()
    assert line["status"] == "failed" and line["failure_kind"] == "infrastructure"
    assert reason in line["metrics"]["error"] and "out-of-memory" not in line["metrics"]["error"]
    assert not covers(line, RunSettings())


def test_a_sigkill_is_called_what_was_seen():
    assert describe_exit(-signal.SIGKILL) == "the child was killed by SIGKILL"
    assert describe_exit(-signal.SIGKILL, "the kernel's log says its out-of-memory killer "
                         "killed it") == ("the child was killed by SIGKILL: out of memory (the "
                                          "kernel's log says its out-of-memory killer killed it)")


def test_the_experiments_own_failure_is_a_line_resume_keeps():
    outcome = ChildOutcome(folder=None, returncode=-signal.SIGKILL)
    line = line_from_outcome(RunSettings(), SweepInfo("run"), planned(), outcome).to_dict()
    assert line["failure_kind"] == "experiment"
    assert line["metrics"]["error"].startswith("the child was killed by SIGKILL")
    assert covers(line, RunSettings())
    ok = ChildOutcome(folder=None, returncode=0, result=ChildResult(status=Status.OK))
    assert "failure_kind" not in line_from_outcome(RunSettings(), SweepInfo("run"), planned(), ok).to_dict()


# The real runner.

FAULTS = ["--suite-name=faults", "--accelerator=cpu", "--xla=None", "--dynamo=None",
          "--torch-xla2=None", "--test=eval", "--start-method=forkserver"]


def start(output, *args):
    return subprocess.Popen(cli_command(output, *args), env=cli_environment(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_hang(output, timeout=120):
    """The hang model's child, once it runs (its grandchild's pid is in its log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log in output.glob("faults-hang-*/*/time/child.log"):
            if re.search(r"fault-model grandchild pid (\d+)", log.read_text()):
                return log
        time.sleep(0.2)
    raise AssertionError("the hang model never started")


@pytest.mark.e2e
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_runner_stopped_with_two_jobs_leaves_no_line_for_what_it_interrupted(tmp_path, stop):
    output = tmp_path / "output"
    # raises ends first, so the pool thread that started the fork server is idle when the
    # stop comes: it ends first, which took the server (and hang's child) with it.
    runner = start(output, *FAULTS, "-k", "^(raises|hang)$", "--jobs=2", "--subprocess-timeout=300")
    wait_for_hang(output)
    deadline = time.monotonic() + 60
    while len(read_results(output / "results.jsonl").lines) < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    runner.send_signal(stop)
    _, stderr = runner.communicate(timeout=120)
    assert runner.returncode == 128 + stop, stderr
    lines = read_results(output / "results.jsonl").lines
    assert [line["model"]["model_name"] for line in lines] == ["raises"], lines
    assert "SIGKILL" not in stderr


def fork_servers_of(runner_pid):
    return [process for process in psutil.Process(runner_pid).children()
            if "runner.run.process.forkserver_server" in " ".join(process.cmdline())]


def pooled_servers_of(pool):
    """The servers forked by the (one) template of the pool folder `pool`."""
    (pid_file,) = pool.glob("*.pid")
    return psutil.Process(int(pid_file.read_text())).children()


@pytest.mark.e2e
@pytest.mark.parametrize("pooled", [False, True], ids=["own-server", "pooled-server"])
def test_a_fork_server_killed_mid_sweep_gives_a_line_resume_runs_again(tmp_path, pooled):
    output = tmp_path / "output"
    pool = tmp_path / "pool"
    runner = start(output, *FAULTS, "-k", "^hang$", "--subprocess-timeout=300",
                   f"--server-pool={pool if pooled else None}")
    wait_for_hang(output)
    (server,) = pooled_servers_of(pool) if pooled else fork_servers_of(runner.pid)
    server.kill()
    _, stderr = runner.communicate(timeout=120)
    if pooled:
        end_templates(pool)
    assert runner.returncode == 0, stderr
    (line,) = read_results(output / "results.jsonl").lines
    assert line["status"] == "failed" and line["failure_kind"] == "infrastructure"
    # A pooled server is not the runner's child: its end is seen, not its exit status.
    end = "ended" if pooled else "was killed by SIGKILL"
    assert re.search(rf"its fork server \(pid \d+\) {end} while it ran",
                     line["metrics"]["error"]), line["metrics"]["error"]
    assert "out-of-memory" not in line["metrics"]["error"]
    again = subprocess.run(cli_command(output, *FAULTS, "-k", "^hang$", "--dry-run"),
                           env=cli_environment(), capture_output=True, text=True, timeout=120)
    assert "1 experiment(s) would run; 0 already recorded" in again.stdout, again.stdout


def test_out_of_memory_is_said_only_where_the_kernel_or_the_memory_watch_saw_it(monkeypatch):
    from runner.run.process import oom

    monkeypatch.setattr(oom, "cgroup_oom_kills", lambda: 2)
    monkeypatch.setattr(oom, "kernel_says_killed_for_memory", lambda pid, since: False)
    watch = oom.MemoryWatch.start(0.0)
    watch.last_available, watch.total = 900 * 2**20, 1000 * 2**20
    assert watch.out_of_memory(5) is None  # a SIGKILL and nothing else: no guess
    watch.last_available = 10 * 2**20
    assert watch.out_of_memory(5) == "the memory watch saw 10 MiB of 1000 MiB available just before"
    monkeypatch.setattr(oom, "cgroup_oom_kills", lambda: 3)
    assert watch.out_of_memory(5) == "the cgroup counted 1 out-of-memory kill(s) while it ran"
    monkeypatch.setattr(oom, "kernel_says_killed_for_memory", lambda pid, since: pid == 5)
    assert watch.out_of_memory(5) == "the kernel's log says its out-of-memory killer killed it"
