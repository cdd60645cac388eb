"""The two tiers (tests/conftest.py): a unit-tier test that starts a process fails, however
it starts one and even where the error is caught; an e2e test may start any."""

import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ProcessStartInUnitTier, cli_environment


def nothing() -> None:
    pass


STARTS = {
    "subprocess.run": lambda: subprocess.run(["true"]),
    "subprocess.Popen": lambda: subprocess.Popen(["true"]).wait(),
    "subprocess.Popen, posix_spawn path": lambda: subprocess.Popen(["/bin/true"], close_fds=False).wait(),
    "os.popen": lambda: os.popen("true").close(),
    "os.system": lambda: os.system("true"),
    "os.fork": lambda: os.fork(),
    "os.posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], dict(os.environ)),
    "os.spawnv": lambda: os.spawnv(os.P_WAIT, "/bin/true", ["true"]),
    **{f"multiprocessing {method}": (lambda method=method: multiprocessing.get_context(method)
                                     .Process(target=nothing).start())
       for method in ("fork", "spawn", "forkserver")},
}


@pytest.mark.parametrize("how", sorted(STARTS))
def test_a_unit_test_cannot_start_a_process(process_guard, how):
    with pytest.raises(ProcessStartInUnitTier, match="mark it @pytest.mark.e2e"):
        STARTS[how]()
    assert process_guard.attempts  # the attempt is recorded: the test would fail anyway
    process_guard.attempts.clear()  # (this test means to start one)


@pytest.mark.e2e
def test_an_e2e_test_can_start_processes():
    assert subprocess.run(["true"]).returncode == 0
    assert os.system("true") == 0
    process = multiprocessing.get_context("spawn").Process(target=nothing)
    process.start()
    process.join(60)
    assert process.exitcode == 0


INNER = '''
import subprocess

import pytest


@pytest.fixture(scope="module")
def shared_run():
    return subprocess.run(["true"]).returncode


def test_caught(process_guard):
    try:
        subprocess.run(["true"])
    except Exception:
        pass


def test_fixture(shared_run):
    pass


def test_pure():
    assert 1 + 1 == 2


@pytest.mark.e2e
def test_marked():
    assert subprocess.run(["true"]).returncode == 0
'''


@pytest.mark.e2e
def test_the_guard_fails_unmarked_tests_even_when_the_error_is_caught(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "pytest.ini").write_text(textwrap.dedent("""\
        [pytest]
        markers =
            e2e: starts processes
        """))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-q", "-rfE", str(tmp_path / "test_inner.py")],
        cwd=tmp_path, env=cli_environment(), capture_output=True, text=True, timeout=300)
    report = done.stdout + done.stderr
    assert done.returncode == 1, report
    assert "1 failed, 2 passed, 1 error" in report, report  # the fixture's start: an error
    assert "FAILED test_inner.py::test_caught - " in report, report
    assert "test_inner.py::test_caught started a process (subprocess._fork_exec)" in report
    assert "ERROR test_inner.py::test_fixture - " in report, report
    assert "test_inner.py::test_fixture started a process (subprocess._fork_exec)" in report
