"""Side files of real runs (issue 43): a file beside the results that does not fit is set
aside with a warning naming it and rebuilt; it never crashes a run, never costs a line."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from runner.plan.probe import answer_path, probe_cache_path, probe_host

MLP = ["--suite-name=builtin", "-k", "^mlp$", "--accelerator=cpu", "--xla=None",
       "--dynamo=None", "--test=eval", "--batch-size=2", "--repeat=2", "--warmup=1"]


@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    """The runners' cache folder for this test alone (their side files), holding a copy of
    the probe's answer from the tests' shared cache (made there first where no runner had
    yet): these tests are about the files beside the results, and a probe of their own cost
    each test 8 to 10 CPU-seconds (tests/runner/plan/test_probe.py tests the probe's file)."""
    probe_host()  # the tests' shared cache, as every runner of the session keys it
    shared = answer_path()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    own = probe_cache_path()  # where a runner looks that finds no other answer to go by
    own.parent.mkdir(parents=True)
    shutil.copy2(shared, own)
    return tmp_path / "cache" / "experiment-runner"


def histories(cache: Path) -> list[Path]:
    return sorted((cache / "reference").glob("*.json"))


@pytest.mark.e2e
@pytest.mark.runner_defaults
def test_a_wrong_shaped_history_costs_no_line_and_remeasured_lines_keep_their_own_files(
        run_cli, tmp_path, own_cache):
    measured = run_cli(*MLP, "--threads=1", output_dir=tmp_path / "first")
    assert measured.returncode == 0, measured.stderr
    [history] = histories(own_cache)
    # Defect 2: valid JSON of the wrong shape crashed the runner after measuring.
    history.write_text('{"launch_us": [["a", 1]]}')
    run = run_cli(*MLP, "--threads=1", output_dir=tmp_path / "second")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    [line] = run.lines()
    assert line["status"] == "ok" and line["metrics"]["per_iter_time"]
    assert any(str(history) in note and "set aside" in note for note in line["notes"])
    assert str(history) in run.stderr
    assert history.with_name(history.name + ".unreadable").exists()
    assert set(json.loads(history.read_text())) >= {"launch_us"}  # rebuilt
    # Defect 3: a usual figure far below any reading flags every attempt; the line kept
    # is the least slow one's, and its files are that attempt's own. Before each attempt
    # the runner waited for a fast state that a host pulse of 1e-9 ms never reaches.
    now = time.time()
    history.write_text(json.dumps({name: [[now, 1e-9]] * 10
                                   for name in ("launch_us", "kernel_ms", "host_ms")}))
    again = run_cli(*MLP, "--threads=1", "--remeasure-slow=2", "--slow-wait=2",
                    output_dir=tmp_path / "third")
    assert again.returncode == 0, again.stderr
    [line] = again.lines()
    verdict = line["summary"]["slow_period"]
    assert len(verdict["earlier_ratios"]) == 2
    assert [(wait["reached"], wait["limit_s"]) for wait in verdict["fast_state_waits"]] == [
        (False, 2)] * 2
    assert all(wait["waited_s"] >= 2 and wait["reads"] >= 2 and wait["last_pulse_ms"] > 0
               for wait in verdict["fast_state_waits"])
    folder = again.output_dir / line["artifacts"]["time"]
    result = json.loads((folder / "result.json").read_text())
    assert result["metrics"]["per_iter_time"] == line["metrics"]["per_iter_time"]
    attempts = sorted(path.name for path in folder.parent.iterdir())
    assert attempts == ["time", "time-attempt2", "time-attempt3"]


@pytest.mark.e2e
def test_a_corrupt_workload_cache_entry_is_set_aside_and_counted_again(run_cli, tmp_path,
                                                                      own_cache):
    first = run_cli(*MLP, output_dir=tmp_path / "first")
    assert first.returncode == 0, first.stderr
    entries = sorted((own_cache / "workload").glob("*.json"))
    assert entries
    for entry in entries:
        stored = json.loads(entry.read_text())
        entry.write_text(json.dumps({"key": stored["key"], "workload": 5}))
    run = run_cli(*MLP, output_dir=tmp_path / "second")
    assert run.returncode == 0, run.stderr
    [line] = run.lines()
    workload = line["workload"]
    assert "error" not in workload and workload["cached"] is False
    assert str(entries[0]) in workload["cache_warning"]
    again = run_cli(*MLP, output_dir=tmp_path / "third")
    assert again.lines()[0]["workload"]["cached"] is True  # rebuilt


# Side files that are no files, in real runs (issue 54): a FIFO or a symbolic link loop in the
# place of the claims file, the reference history, the probe's cached answer or a workload-cache
# entry is set aside with a warning naming it; the run neither hangs nor loses its line. And
# numbers at the edge of their range in those files never reach the results file as anything
# but strict JSON.

#: A run of the builtin mlp takes seconds (a probe of its own, 10 to 20 s on a loaded
#: machine); a run that hangs on a side file runs into this.
RUN_SECONDS = 240


def strict_lines(path: Path) -> list[dict]:
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} written into {path}")

    return [json.loads(text, parse_constant=refuse) for text in path.read_text().splitlines()]


def side_files(cache: Path, output: Path) -> dict[str, Path]:
    [history] = histories(cache)
    [entry] = sorted((cache / "workload").glob("*.json"))
    return {"claims": output / "results.jsonl.claims", "history": history,
            "probe": probe_cache_path(), "workload": entry}


def replace(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(path.name)


#: What each side file is replaced with: every kind of odd file at least once (each kind at
#: each place is tested in tests/core/files/test_side_files.py: they are read alike).
ODD_FILES = {"claims": "fifo", "history": "fifo", "workload": "fifo", "probe": "loop"}
REASONS = {"fifo": "a FIFO, not a regular file", "loop": "a symbolic link that loops"}


@pytest.mark.e2e
@pytest.mark.runner_defaults
def test_odd_side_files_and_numbers_at_the_edges_cost_no_line_and_never_hang(
        run_cli, tmp_path, own_cache):  # noqa: F811
    first = run_cli(*MLP, "--threads=1", output_dir=tmp_path / "first", timeout=RUN_SECONDS)
    assert first.returncode == 0, first.stderr
    # Defect 10: a FIFO hung the runner (the claims file's inside the results file's lock,
    # with Ctrl-C deferred), or its child (a workload-cache entry's).
    output = tmp_path / "odd"
    places = side_files(own_cache, output)
    for name, path in places.items():
        replace(path, ODD_FILES[name])
    run = run_cli(*MLP, "--threads=1", output_dir=output, timeout=RUN_SECONDS)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    [line] = strict_lines(run.results_path)
    assert line["status"] == "ok" and line["metrics"]["per_iter_time"]
    for name in ("claims", "history", "probe"):  # the runner's own warnings
        said = f"{places[name]} does not fit its shape ({REASONS[ODD_FILES[name]]})"
        assert said in run.stderr, (name, run.stderr)
    assert any(str(places["history"]) in note for note in line["notes"])
    workload = line["workload"]  # read by the child: its warning is in the line
    assert workload["cached"] is False and REASONS["fifo"] in workload["cache_warning"]
    # Rebuilt; the fresh answer where its modules key it (runner/plan/probe.py: answer_path).
    rebuilt = {**places, "probe": answer_path()}
    for name in ("history", "probe", "workload"):
        assert rebuilt[name].is_file() and not rebuilt[name].is_symlink(), name
    # Defects 8 and 9: a history of tiny readings made the slow-period ratio Infinity, a
    # FLOP count of 1.7e308 the TFLOP/s: both were written so into the results file.
    now = time.time()
    places["history"].write_text(json.dumps({name: [[now, 5e-324]] * 10 for name in
                                             ("launch_us", "kernel_ms", "host_ms")}))
    entry = json.loads(places["workload"].read_text())
    entry["workload"]["flops_per_iteration"] = 1.7e308
    places["workload"].write_text(json.dumps(entry))
    edges = run_cli(*MLP, "--threads=1", output_dir=tmp_path / "edges", timeout=RUN_SECONDS)
    assert edges.returncode == 0, edges.stderr
    [line] = strict_lines(edges.results_path)
    assert line["status"] == "ok"
    assert not any("written as null" in note for note in line.get("notes", []))
    assert "not from" in " ".join(line["notes"])  # the history did not fit: set aside
    assert line["workload"]["cached"] is False
    assert "flops_per_iteration" in line["workload"]["cache_warning"]
    assert 0 < line["summary"]["throughput"]["tflops"] < 1e6
