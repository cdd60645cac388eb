"""Unusable output paths are refused up front; a full disk or a file-size limit anywhere stops
the sweep with one line and every earlier line whole (runner/plan/output.py, issue 12 item 3)."""

import contextlib
import errno
import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import ExperimentConfig, ModelConfig, RunSettings
from core.contract import ChildSpec, Role, write_message
from core.files.results_file import read_results
from runner.run.executor import ExecutorOptions, ExperimentExecutor, SweepInfo
from runner.plan.matrix import PlannedExperiment
from runner.plan.output import OutputPathError, output_paths, prepare_output
from tests.conftest import PROJECT_ROOT, cli_command, cli_environment

EAGER = ["--accelerator=cpu", "--xla=None", "--dynamo=None", "--test=eval", "--repeat=1",
         "--warmup=0"]


@pytest.mark.parametrize("basename, message", [
    ("", "must name a file"), ("  ", "must name a file"), ("a/", "must name a file"),
    ("..", "leads outside"), ("../x.jsonl", "leads outside"), ("a/../../x", "leads outside"),
    (".", "leads outside"), ("/etc/x.jsonl", "must be relative"), ("x\x00y", "NUL"),
])
def test_a_results_name_outside_the_output_folder_is_refused(tmp_path, basename, message):
    with pytest.raises(OutputPathError, match=message):
        output_paths(str(tmp_path), basename)


def test_a_results_name_inside_the_output_folder_is_fine(tmp_path):
    paths = output_paths(str(tmp_path / "out"), "sub/../sub/results.jsonl")
    assert paths.results == tmp_path / "out" / "sub" / "results.jsonl"
    prepare_output(paths, str(tmp_path / "out"))
    assert paths.results.parent.is_dir() and not paths.results.exists()


def test_a_tilde_folder_is_the_home_or_taken_as_written(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert output_paths("~/out", "r.jsonl").results == tmp_path / "home" / "out" / "r.jsonl"
    # "~name" of no user on this machine is a folder of that name, as a shell leaves it.
    monkeypatch.chdir(tmp_path)
    unknown = "~no-such-user-here0"
    assert output_paths(unknown, "r.jsonl").results == tmp_path / unknown / "r.jsonl"


def test_folders_files_and_special_files_are_refused(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    (tmp_path / "folder").mkdir()
    with pytest.raises(OutputPathError, match="is not a folder"):
        output_paths(str(a_file), "results.jsonl")
    with pytest.raises(OutputPathError, match="names a folder"):
        output_paths(str(tmp_path), "folder")
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(OutputPathError, match="not a regular file"):
        output_paths(str(tmp_path), "zero")
    with pytest.raises(OutputPathError, match="cannot be created"):
        prepare_output(output_paths("/proc/no-such/out", "r.jsonl"), "/proc/no-such/out")
    with pytest.raises(OutputPathError, match="not writable|cannot be created"):
        prepare_output(output_paths("/proc", "r.jsonl"), "/proc")


@contextlib.contextmanager
def tmpfs(where: Path, *options: str):
    """A small tmpfs (root only); the test is skipped where none can be mounted."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.mark.e2e
@pytest.mark.parametrize("dirname, named", [
    ("FILE", "is not a folder"),
    ("/proc/no-such/out", "cannot be created"),
    ("/proc", "is not writable"),
])
def test_the_cli_refuses_an_unusable_output_folder_before_running_anything(
        run_cli, tmp_path, dirname, named):
    if dirname == "FILE":
        dirname = str(tmp_path / "a-file")
        Path(dirname).write_text("x")
    run = run_cli(*EAGER, "-k", "^mlp$", output_dir=Path(dirname))
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(f"experiment-runner: error: --output-dirname {dirname!r} {named}")
    assert not list(Path(tmp_path).glob("output*"))


@pytest.mark.e2e
def test_the_cli_refuses_a_read_only_output_folder(run_cli, tmp_path):
    with tmpfs(tmp_path / "ro", "ro", "size=64k") as folder:
        run = run_cli(*EAGER, "-k", "^mlp$", output_dir=folder)
    assert run.returncode == 2
    assert "is not writable: Read-only file system" in run.stderr and "Traceback" not in run.stderr


def limited_file_size(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.e2e
def test_a_file_size_limit_stops_the_sweep_with_one_line_and_whole_lines(tmp_path):
    """`ulimit -f`: the second line would cross the limit; it is undone, the sweep stops."""
    # Lines are about 2.5 kB, more under load (contention notes): the limit lets the longest
    # line of an unlimited sweep in, with room, and never two lines.
    unlimited = tmp_path / "unlimited"
    subprocess.run(cli_command(unlimited, *EAGER), capture_output=True, timeout=600,
                   env=cli_environment(), check=True)
    sizes = [len(raw) for raw in (unlimited / "results.jsonl").read_bytes().splitlines(keepends=True)]
    limit = max(sizes) + 400
    assert 2 * min(sizes) > limit
    output = tmp_path / "output"
    run = subprocess.run(cli_command(output, *EAGER), capture_output=True, text=True, timeout=600,
                         env=cli_environment(), preexec_fn=limited_file_size(limit))
    assert run.returncode == 74, run.stderr
    assert "Traceback" not in run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"experiment-runner: error: {output / 'results.jsonl'}: File too large")
    assert "are intact (1 from this run)" in last
    raw = (output / "results.jsonl").read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    (line,) = read_results(output / "results.jsonl").lines
    assert line["status"] == "ok"


@pytest.mark.e2e
def test_a_full_disk_stops_the_sweep_with_one_line_and_leaves_no_empty_file(tmp_path):
    with tmpfs(tmp_path / "small", "size=24k") as folder:
        output = folder / "output"
        run = subprocess.run(cli_command(output, *EAGER), capture_output=True, text=True,
                             timeout=600, env=cli_environment())
        assert run.returncode == 74, run.stderr
        assert "Traceback" not in run.stderr
        last = run.stderr.strip().splitlines()[-1]
        assert last.startswith(f"experiment-runner: error: {output}/")  # names the file
        assert "No space left on device" in last and "the sweep stopped" in last
        results = output / "results.jsonl"
        if results.exists():
            assert read_results(results).bad_lines == []
            assert results.read_bytes().endswith(b"\n") or results.stat().st_size == 0
        for written in list(output.rglob("spec.json")) + list(output.rglob("result.json")):
            json.loads(written.read_text())  # never empty, never half
        assert not list(output.rglob("*.tmp"))


def planned() -> PlannedExperiment:
    return PlannedExperiment(ModelConfig("faults", "raises"),
                             ExperimentConfig("cpu", None, None, None, "eval", stack="eager"), "eager")


def test_a_spec_whose_write_fails_at_close_names_its_file(tmp_path, monkeypatch):
    """ENOSPC at the flush on close comes without a file name (issue 23: the message said
    'output: No space left on device'); the error names the spec."""
    executor = ExperimentExecutor(ExecutorOptions(output_dir=tmp_path), RunSettings(), SweepInfo("run"))

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")  # as close() raises it

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError) as raised:
        executor.run_child(planned(), Role.TIME)
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == str(executor.child_folder(planned(), Role.TIME) / "spec.json")


def test_a_spec_that_cannot_be_written_raises_and_leaves_nothing(tmp_path, monkeypatch):
    executor = ExperimentExecutor(ExecutorOptions(output_dir=tmp_path), RunSettings(), SweepInfo("run"))
    real = Path.write_text

    def full(self, *args, **kwargs):
        if self.name.startswith("spec.json"):
            real(self, "{", encoding="utf-8")  # part of it made it to the disk
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(OSError) as raised:
        executor.run_child(planned(), Role.TIME)
    assert raised.value.errno == errno.ENOSPC
    folder = executor.child_folder(planned(), Role.TIME)
    assert sorted(p.name for p in folder.iterdir()) == []


@pytest.mark.e2e
def test_a_child_that_cannot_write_its_result_says_so_and_exits_74(tmp_path):
    folder = tmp_path / "child"
    folder.mkdir()
    write_message(folder / "spec.json", ChildSpec(
        planned().model, planned().experiment, RunSettings(repeat=1, warmup=0), Role.TIME, str(folder)))
    child = subprocess.run([sys.executable, "-m", "child.worker", str(folder)], capture_output=True,
                           text=True, timeout=300, env=cli_environment(), cwd=str(PROJECT_ROOT),
                           preexec_fn=limited_file_size(300))
    assert child.returncode == 74, child.stderr
    assert f"cannot write {folder / 'result.json'}: File too large" in child.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["spec.json"]


def test_the_early_check_leaves_no_folder_behind(tmp_path):
    """Checked before planning, made once there is something to run: a refused request
    leaves no empty output folder."""
    from runner.plan.output import check_output, prepare_output

    paths = output_paths(str(tmp_path / "out" / "deeper"), "results.jsonl")
    check_output(paths, str(tmp_path / "out" / "deeper"))
    assert list(tmp_path.iterdir()) == []
    prepare_output(paths, str(tmp_path / "out" / "deeper"))
    assert (tmp_path / "out" / "deeper").is_dir()
    (tmp_path / "out" / "deeper" / "results.jsonl").write_text("")
    check_output(paths, str(tmp_path / "out" / "deeper"))  # an existing folder stays
    assert (tmp_path / "out" / "deeper" / "results.jsonl").exists()
