"""benchmarks/cost/suite_cost.py: each test file's CPU and wall, read around a real pytest."""

from __future__ import annotations

import os

import pytest

from benchmarks.cost.suite_cost import busy_seconds, failed_tests, main, pytest_summary

BURNS_AND_WAITS = '''
import time


def test_burns_then_waits():
    deadline = time.process_time() + 0.6
    while time.process_time() < deadline:
        pass
    time.sleep(1.0)
'''


def test_busy_seconds_reads_the_cpu_line(tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal, in clock ticks
    stat.write_text("cpu  100 20 30 5000 40 5 5 10 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    assert busy_seconds(str(stat)) == pytest.approx(170 / os.sysconf("SC_CLK_TCK"))
    stat.write_text("intr 1 2 3\n")
    with pytest.raises(ValueError, match="cpu line"):
        busy_seconds(str(stat))


def test_pytest_summary_is_the_counting_line():
    output = "....\n== 1 failed, 3 passed, 2 deselected in 4.20s ==\n"
    assert pytest_summary(output) == "1 failed, 3 passed, 2 deselected in 4.20s"
    assert pytest_summary("no tests ran\n") == ""


def test_failed_tests_are_the_short_summarys_names():
    output = ("F.E\n= short test summary info =\nFAILED tests/a.py::test_x - assert 1 == 2\n"
              "ERROR tests/b.py::test_y - OSError\n= 1 failed, 1 passed, 1 error in 2s =\n")
    assert failed_tests(output) == ["FAILED tests/a.py::test_x - assert 1 == 2",
                                    "ERROR tests/b.py::test_y - OSError"]
    assert failed_tests("...\n= 3 passed in 1s =\n") == []


@pytest.mark.e2e
def test_a_file_that_burns_and_waits_is_counted_for_each(tmp_path, capsys):
    test_file = tmp_path / "test_burn.py"
    test_file.write_text(BURNS_AND_WAITS)
    assert main([str(test_file), "--idle", "0", "--cores", "2", "--bound", "10"]) == 0
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if "test_burn.py" in line)
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    cpu, wall = float(cells[1]), float(cells[2])
    assert cpu >= 0.6 and wall >= 1.0 + 0.6
    assert "1 passed" in cells[4]
    assert "at most 20 CPU-s" in printed


def test_a_missing_file_is_named(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["tests/no_such_test.py", "--idle", "0"])
    assert stopped.value.code == 2
    assert "no such test file: tests/no_such_test.py" in capsys.readouterr().err


@pytest.mark.e2e
def test_a_stopped_run_prints_what_it_measured(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import PROJECT_ROOT, cli_environment

    quick, slow = tmp_path / "test_quick.py", tmp_path / "test_slow.py"
    quick.write_text("def test_quick():\n    pass\n")
    slow.write_text("import time\n\n\ndef test_slow():\n    time.sleep(60)\n")
    run = subprocess.Popen([sys.executable, "-m", "benchmarks.cost.suite_cost", str(quick),
                            str(slow), "--idle", "0"], cwd=PROJECT_ROOT, env=cli_environment(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    progress = ""
    while "test_quick.py" not in progress and time.monotonic() < deadline:
        progress += run.stderr.readline()
    time.sleep(1.0)  # the slow file has started
    run.send_signal(signal.SIGTERM)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert "test_quick.py" in out and "test_slow.py" not in out
    assert "stopped after 1 of 2 files" in err


@pytest.mark.e2e
def test_per_test_counts_each_test_its_own_cpu_and_names_the_costliest(tmp_path, capsys):
    test_file = tmp_path / "test_two.py"
    test_file.write_text(BURNS_AND_WAITS + '''

def test_waits():
    time.sleep(0.5)


def test_fails():
    assert 1 == 2
''')
    assert main([str(test_file), "--idle", "0", "--per-test", "1", "--cores", "2",
                 "--bound", "10"]) == 1
    captured = capsys.readouterr()
    assert "test_two.py::test_fails" in captured.err and "1 failed, 2 passed" in captured.err
    printed = captured.out
    rows = [line for line in printed.splitlines() if "test_two.py::" in line]
    assert len(rows) == 1 and "test_burns_then_waits" in rows[0]  # the top 1 only
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    cpu, wall = float(cells[1]), float(cells[2])
    assert cpu >= 0.6 and wall >= 1.6  # the machine's: the suite's other workers count too
    assert printed.count("3 tests: ") == 1 and "the 1 above take" in printed


def test_per_test_table_ranks_by_cpu_and_sums_all():
    from benchmarks.cost.suite_cost import PerTestCost, per_test_table

    costs = [PerTestCost("a.py::cheap", 1.0, 5.0), PerTestCost("b.py::dear", 3.0, 2.0)]
    text = per_test_table(costs, 1, cores=2, bound=1)
    assert "b.py::dear" in text and "a.py::cheap" not in text
    assert "2 tests: 4 CPU-s, 7 s of wall" in text and "(75%)" in text
    assert "at most 2 CPU-s: these take 2.00x that" in text
    assert "no test recorded" in per_test_table([], 5, cores=2, bound=1)


def test_per_test_refuses_a_count_below_one(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--per-test", "0", "--idle", "0"])
    assert stopped.value.code == 2
    assert "--per-test 0" in capsys.readouterr().err


def test_processes_are_told_apart_by_their_command_and_a_fork_by_its_parents():
    from benchmarks.cost.suite_cost import SeenProcess, process_kind

    def seen(command, name="python", pid=2, parent=1):
        return SeenProcess(pid, parent, name, command, 0.0, 1.0)

    template = seen("python -m runner.run.process.forkserver_pool POOL NAME 600 torch", pid=1)
    assert process_kind(template, None) == "the pool's templates"
    assert process_kind(seen(template.command), template) == "forked from the pool's templates"
    assert process_kind(seen("python experiment_runner.py --suite-name=builtin"), None) == \
        "runner invocations"
    assert process_kind(seen("python -m runner.plan.probe --no-compiler-checks"), None) == \
        "probes"
    assert process_kind(seen("", name="cc1plus"), None) == "C/C++ builds"
    assert process_kind(seen("python -m pip install -q x"), None) == "pip and uv"
    assert process_kind(seen("python -m benchmarks.fidelity.graph_parity --side ours"),
                        None) == "benchmark scripts (fidelity checks, costs)"
    for harness in ("python huggingface.py --performance --only x",
                    "python /x/reference/pytorch_xla_benchmarks/result_analyzer.py"):
        assert process_kind(seen(harness), None) == \
            "the reference tools (the harness, the analyzer)"
    assert process_kind(seen("python -c print(1)"), None) == "other Python"
    assert process_kind(seen("sleep 1", name="sleep"), None) == "other"


BURNS_IN_A_CHILD = '''
import subprocess
import sys


def test_starts_a_child_that_burns():
    subprocess.run([sys.executable, "-c", "import time\\n"
                    "deadline = time.process_time() + 0.8\\n"
                    "while time.process_time() < deadline:\\n    pass"], check=True)
'''


@pytest.mark.e2e
def test_by_process_counts_a_tests_child_in_its_kind_and_names_a_failed_test(tmp_path, capsys):
    test_file = tmp_path / "test_child.py"
    test_file.write_text(BURNS_IN_A_CHILD + "\n\ndef test_that_fails():\n    assert 1 == 2\n")
    assert main([str(test_file), "--idle", "0", "--cores", "1", "--by-process"]) == 1
    captured = capsys.readouterr()
    assert "1 failed, 1 passed" in captured.err
    assert "FAILED" in captured.err and "test_child.py::test_that_fails" in captured.err
    printed = captured.out
    row = next(line for line in printed.splitlines() if "other Python" in line)
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert int(cells[1]) >= 1 and float(cells[2]) >= 0.6
    assert "pytest-xdist workers" in printed and "the machine was busy" in printed
