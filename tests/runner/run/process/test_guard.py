"""Every process an experiment starts dies with the runner, however the runner ends, and no
scratch folder outlives it (runner/run/process/guard.py, runner/run/process/scratch.py, runner/run/process/signals.py)."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from runner.run.process.scratch import PREFIX, ScratchRoot
from tests.conftest import PROJECT_ROOT, cli_command, cli_environment

import pytest

pytestmark = pytest.mark.e2e  # (tests/conftest.py: the end-to-end tier)

EAGER = ["--accelerator=cpu", "--xla=None", "--dynamo=None", "--test=eval", "--repeat=1",
         "--warmup=0"]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def all_gone(pids, grace=15.0) -> bool:
    deadline = time.monotonic() + grace
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture
def runner_with_own_tmp(tmp_path):
    """Starts a runner whose TMPDIR is the test's own; a runner the test left running (it
    failed before the runner ended) is killed, with what it started, at the test's end, so
    that it does not run on beside the rest of the suite."""
    started = []

    def start(*args):
        environment = cli_environment()
        environment["TMPDIR"] = str(tmp_path / "tmp")
        (tmp_path / "tmp").mkdir()
        output = tmp_path / "output"
        process = subprocess.Popen(cli_command(output, *args), env=environment, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        started.append(process)
        return process, output

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()  # its guard then ends the experiments' processes
            process.communicate(timeout=60)


def hang_pids(output, runner, timeout=120):
    """The worker's pid and its grandchild's, once the hang model runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for log in output.glob("*/*/time/child.log"):
            found = re.search(r"fault-model grandchild pid (\d+)", log.read_text())
            if found:
                workers = [p.pid for p in psutil.Process(runner.pid).children()
                           if "child.worker" in p.cmdline()]
                return workers, int(found.group(1))
        time.sleep(0.2)
    raise AssertionError("the hang model never started its grandchild")


def scratch_roots(tmp_path):
    return [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith(PREFIX)]


def test_sigkill_of_the_runner_kills_the_grandchildren_and_removes_its_scratch(
        tmp_path, runner_with_own_tmp):
    runner, output = runner_with_own_tmp("--suite-name=faults", "-k", "^hang$", *EAGER)
    workers, grandchild = hang_pids(output, runner)
    assert scratch_roots(tmp_path)
    runner.kill()
    runner.communicate(timeout=60)
    assert all_gone(workers + [grandchild]), "a process of the experiment outlived the runner"
    deadline = time.monotonic() + 15
    while scratch_roots(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert scratch_roots(tmp_path) == []


def test_sigterm_behaves_like_ctrl_c_and_exits_143(tmp_path, runner_with_own_tmp):
    runner, output = runner_with_own_tmp("--suite-name=faults", "-k", "^(raises|hang)$",
                                         *EAGER)
    workers, grandchild = hang_pids(output, runner)
    runner.send_signal(signal.SIGTERM)
    _, stderr = runner.communicate(timeout=60)
    assert runner.returncode == 143, stderr
    assert "terminated (SIGTERM): 1 experiment(s) finished and recorded" in stderr
    assert "Traceback" not in stderr
    assert all_gone(workers + [grandchild])
    assert scratch_roots(tmp_path) == []
    from core.files.results_file import read_results

    (line,) = read_results(output / "results.jsonl").lines
    assert line["model"]["model_name"] == "raises"
    assert not (output / "results.jsonl.claims").exists()


def test_ctrl_c_during_the_host_probe_exits_130_without_a_traceback(runner_with_own_tmp):
    runner, _ = runner_with_own_tmp(*EAGER, "-k", "^mlp$", "--no-probe-cache")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        children = psutil.Process(runner.pid).children()
        if any("runner.plan.probe" in " ".join(child.cmdline()) for child in children):
            break
        time.sleep(0.02)
    else:
        raise AssertionError("the probe never started")
    runner.send_signal(signal.SIGINT)
    _, stderr = runner.communicate(timeout=60)
    assert runner.returncode == 130
    assert "interrupted (SIGINT)" in stderr and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1


CRASHING_RUNNER = """
import os, subprocess, sys, time
from pathlib import Path
from runner.run.process.guard import ProcessGuard
from runner.run.process.scratch import ScratchRoot

guard, scratch = ProcessGuard(), ScratchRoot()
guard.start()
guard.remove_on_exit(scratch.create())
environment = dict(os.environ, **guard.environment())
# A child in a session of its own, whose grandchild leaves that session too.
code = ("import subprocess, sys, time; "
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True); "
        "print(g.pid, flush=True); time.sleep(600)")
child = subprocess.Popen([sys.executable, "-c", code], env=environment, start_new_session=True,
                         stdout=subprocess.PIPE, text=True)
guard.watch(child.pid)
print(child.pid, child.stdout.readline().strip(), scratch.path, flush=True)
os._exit(1)  # a crash: no finally, no atexit
"""


def test_a_crashed_runner_leaves_no_process_and_no_scratch(tmp_path):
    environment = cli_environment()
    environment["TMPDIR"] = str(tmp_path)
    crashed = subprocess.run([sys.executable, "-c", CRASHING_RUNNER], capture_output=True,
                             text=True, env=environment, cwd=str(PROJECT_ROOT), timeout=60)
    assert crashed.returncode == 1, crashed.stderr
    child, grandchild, scratch = crashed.stdout.split()
    assert all_gone([int(child), int(grandchild)])
    deadline = time.monotonic() + 15
    while Path(scratch).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(scratch).exists()


def test_scratch_roots_of_runners_that_are_gone_are_swept(tmp_path):
    finished = subprocess.Popen(["true"])
    finished.wait()
    stale = tmp_path / f"{PREFIX}{finished.pid}-{int(time.time()) - 5000}-abc"
    reused = tmp_path / f"{PREFIX}{os.getpid()}-12345-abc"  # this pid, another start time
    mine = tmp_path / f"{PREFIX}{os.getpid()}-{int(psutil.Process().create_time())}-abc"
    unrelated = tmp_path / f"{PREFIX}someone-else"
    for folder in (stale, reused, mine, unrelated):
        (folder / "inductor").mkdir(parents=True)
    root = ScratchRoot(tmp_path)
    created = root.create()
    assert not stale.exists() and not reused.exists()
    assert mine.exists() and unrelated.exists() and created.exists()
    child = root.new_folder()
    assert child.parent == created
    root.remove()
    assert not created.exists()


def test_the_project_root_children_import_from_is_the_projects_folder():
    """Children find the project through PROJECT_ROOT (first on their import path), with no
    install: it must be the folder holding experiment_runner.py and the packages, wherever
    the module that names it lies."""
    from runner.plan import probe
    from runner.run.process import child_env, forkserver_client, guard

    assert (guard.PROJECT_ROOT / "experiment_runner.py").is_file()
    assert (guard.PROJECT_ROOT / "child" / "worker.py").is_file()
    assert (child_env.PROJECT_ROOT == forkserver_client.PROJECT_ROOT == guard.PROJECT_ROOT
            == probe.PROJECT_ROOT)
