import multiprocessing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.files.results_file import (ResultsFile, ResultsFileError, append_line, read_results,
                               shape_problem)


def write_many(path: str, writer: int, count: int) -> None:
    for index in range(count):
        append_line(Path(path), {"writer": writer, "index": index, "pad": "x" * 5000})


@pytest.mark.e2e
def test_two_processes_appending_never_interleave(tmp_path):
    path = tmp_path / "results.jsonl"
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=write_many, args=(str(path), w, 150)) for w in range(2)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(60)
        assert process.exitcode == 0
    read = read_results(path)
    assert read.bad_lines == []
    assert sorted((line["writer"], line["index"]) for line in read.lines) == sorted(
        (w, i) for w in range(2) for i in range(150)
    )


def test_a_truncated_line_is_reported_and_the_next_append_stays_whole(tmp_path):
    path = tmp_path / "results.jsonl"
    append_line(path, {"n": 1})
    with open(path, "ab") as handle:
        handle.write(b'{"n": 2, "metrics": {"total_')  # a writer killed mid-line
    append_line(path, {"n": 3})
    read = read_results(path)
    assert [line["n"] for line in read.lines] == [1, 3]
    assert [(bad.lineno, bad.path) for bad in read.bad_lines] == [(2, str(path))]


def test_corrupted_lines_are_skipped_with_their_line_numbers(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"n": 1}\n\nnot json\n[1, 2]\n{"n": 5}\n', encoding="utf-8")
    read = read_results(path)
    assert [line["n"] for line in read.lines] == [1, 5]
    assert [bad.lineno for bad in read.bad_lines] == [3, 4]
    assert "not a JSON object" in read.bad_lines[1].reason


def test_a_folder_is_not_a_results_file(tmp_path):
    with pytest.raises(ResultsFileError, match="is a folder"):
        read_results(tmp_path)


def test_backup_keeps_the_old_file(tmp_path):
    path = tmp_path / "results.jsonl"
    append_line(path, {"n": 1})
    first = ResultsFile(path).backup()
    append_line(path, {"n": 2})
    second = ResultsFile(path).backup()
    assert not path.exists() and first != second
    assert [read_results(p).lines for p in (first, second)] == [[{"n": 1}], [{"n": 2}]]
    assert ResultsFile(path).backup() is None


# Appends that fail leave the file as it was (issue 12, item 3).

APPEND_UNTIL_THE_LIMIT = """
import resource, signal, sys
from pathlib import Path
from core.files.results_file import append_line
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
written = 0
try:
    while True:
        append_line(Path(sys.argv[1]), {"n": written, "pad": "x" * 700})
        written += 1
except OSError as error:
    print(written, error.errno, error.filename)
"""


@pytest.mark.e2e
def test_a_file_size_limit_never_leaves_half_a_line(tmp_path):
    """`ulimit -f`: the write that crosses the limit is short, then EFBIG; it is undone."""
    import errno
    import subprocess
    import sys

    from tests.conftest import PROJECT_ROOT, cli_environment

    path = tmp_path / "results.jsonl"
    limit = 4000  # room for five lines and part of a sixth
    done = subprocess.run([sys.executable, "-c", APPEND_UNTIL_THE_LIMIT, str(path), str(limit)],
                          capture_output=True, text=True, env=cli_environment(),
                          cwd=str(PROJECT_ROOT), timeout=60)
    assert done.returncode == 0, done.stderr
    written, code, filename = done.stdout.split()
    assert int(code) == errno.EFBIG and filename == str(path)
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and len(raw) <= limit
    read = read_results(path)
    assert read.bad_lines == [] and [line["n"] for line in read.lines] == list(range(int(written)))
    assert int(written) == 5


@pytest.mark.parametrize("failure", ["ENOSPC", "EIO", "EFBIG"])
def test_a_failed_write_is_cut_back_to_the_last_whole_line(tmp_path, monkeypatch, failure):
    import errno
    import os

    path = tmp_path / "results.jsonl"
    append_line(path, {"n": 1})
    before = path.read_bytes()
    real_write = os.write

    def half_then_fail(fd, data):
        if len(data) > 10:
            return real_write(fd, bytes(data[: len(data) // 2]))  # a short write...
        raise OSError(getattr(errno, failure), os.strerror(getattr(errno, failure)))  # ...then none

    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(OSError) as raised:
        append_line(path, {"n": 2, "pad": "y" * 100})
    monkeypatch.undo()
    assert raised.value.errno == getattr(errno, failure) and raised.value.filename == str(path)
    assert path.read_bytes() == before
    append_line(path, {"n": 3})
    assert [line["n"] for line in read_results(path).lines] == [1, 3]


def test_an_interrupted_append_is_undone_too(tmp_path, monkeypatch):
    import os

    path = tmp_path / "results.jsonl"
    append_line(path, {"n": 1})
    before = path.read_bytes()
    real_write = os.write
    calls = []

    def write_then_interrupt(fd, data):
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real_write(fd, bytes(data[:5]))

    monkeypatch.setattr(os, "write", write_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        append_line(path, {"n": 2})
    assert path.read_bytes() == before


# Reading is bounded (issue 12, item 4).

def test_an_endless_or_special_file_is_refused(tmp_path):
    import os

    with pytest.raises(ResultsFileError, match="not a regular file"):
        read_results(Path("/dev/zero"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ResultsFileError, match="not a regular file"):
        read_results(fifo)


def test_a_huge_line_is_skipped_without_being_loaded(tmp_path):
    path = tmp_path / "results.jsonl"
    with open(path, "wb") as handle:
        handle.write(b'{"n": 1}\n')
        handle.write(b'{"pad": "' + b"z" * 5000 + b'"}\n')
        handle.write(b"[" * 3000 + b"\n")            # deeper than the JSON parser goes
        handle.write(b'{"n": 4}\n')
        handle.write(b"q" * 5000)                    # and no newline at the end
    read = read_results(path, max_line_bytes=1000)
    assert [line["n"] for line in read.lines] == [1, 4]
    assert [(bad.lineno, bad.reason) for bad in read.bad_lines] == [
        (2, "longer than 1000 bytes"), (3, read.bad_lines[1].reason), (5, "longer than 1000 bytes")]
    assert read.end_offset == path.stat().st_size


def test_reading_stops_at_the_size_the_file_had_when_opened(tmp_path, monkeypatch):
    """A file that grows while it is read (or never ends) cannot keep a reader going."""
    import core.files.results_file as results_file

    path = tmp_path / "results.jsonl"
    append_line(path, {"n": 0})
    real_parse = results_file._parse

    def parse_while_growing(reader, lines, read, name):
        for n in range(1, 50):
            append_line(path, {"n": n})
        real_parse(reader, lines, read, name)

    monkeypatch.setattr(results_file, "_parse", parse_while_growing)
    read = read_results(path)
    assert [line["n"] for line in read.lines] == [0]


def test_reading_from_an_offset_gives_only_the_new_lines_with_their_numbers(tmp_path):
    path = tmp_path / "results.jsonl"
    append_line(path, {"n": 1})
    first = read_results(path)
    with open(path, "ab") as handle:
        handle.write(b"\nnot json\n")
    append_line(path, {"n": 2})
    later = ResultsFile(path).read(first.end_offset, first.last_lineno)
    assert [line["n"] for line in later.lines] == [2]
    assert [bad.lineno for bad in later.bad_lines] == [3]
    assert later.file_id == first.file_id and later.last_lineno == 4


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=3000))
def test_any_bytes_read_as_lines_or_bad_lines_never_an_error(tmp_path, data):
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(data)
    read = read_results(path, max_line_bytes=500)
    assert all(isinstance(line, dict) for line in read.lines)
    assert read.end_offset == len(data)
    assert len(read.lines) + len(read.bad_lines) <= data.count(b"\n") + 1


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(JSON, max_size=8))
def test_json_of_any_shape_reads_objects_and_lists_the_rest(tmp_path, values):
    import json

    path = tmp_path / "fuzz.jsonl"
    path.write_text("".join(json.dumps(value) + "\n" for value in values))
    read = read_results(path)
    expected = [value for value in values if isinstance(value, dict) and not shape_problem(value)]
    assert json.dumps(read.lines) == json.dumps(expected)  # nan != nan, but prints alike
    assert len(read.bad_lines) == len(values) - len(expected)


@pytest.mark.parametrize("part", ["summary", "model", "experiment"])
@pytest.mark.parametrize("value", ["n/a", 3, [1], True])
def test_a_line_whose_part_is_not_an_object_is_a_bad_line_with_its_number(tmp_path, part, value):
    import json

    path = tmp_path / "results.jsonl"
    good = {"model": {"model_name": "mlp"}, "experiment": {"test": "eval"}, "summary": {}}
    path.write_text("".join(json.dumps(line) + "\n" for line in (good, dict(good, **{part: value}), good)))
    read = read_results(path)
    assert read.lines == [good, good]
    assert [(bad.lineno, bad.reason) for bad in read.bad_lines] == [
        (2, f"its {part!r} is {type(value).__name__}, not a JSON object")]


@pytest.mark.parametrize("version", ['"abc"', "null", "-1", "0", str(2**80), "2.0", "true"])
def test_a_schema_version_that_is_no_version_number_is_a_bad_line(tmp_path, version):
    # Issue 43: these were accepted without a word by resume.
    path = tmp_path / "results.jsonl"
    path.write_text('{"model": {"model_name": "mlp"}, "schema_version": 2}\n'
                    f'{{"model": {{"model_name": "cnn"}}, "schema_version": {version}}}\n')
    read = read_results(path)
    assert [line["model"]["model_name"] for line in read.lines] == ["mlp"]
    assert [bad.lineno for bad in read.bad_lines] == [2]
    assert "schema_version" in read.bad_lines[0].reason


def test_a_file_with_lines_but_no_results_line_is_refused_for_appending(tmp_path):
    from core.files.results_file import ResultsFile, ResultsFileError

    path = tmp_path / "results.jsonl"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ResultsFileError, match="holds no readable results line"):
        ResultsFile(path).read_for_appending()
    path.write_text("a,b\n" + '{"model": {"model_name": "mlp"}}\n')
    assert len(ResultsFile(path).read_for_appending().lines) == 1
    path.write_text("")
    assert ResultsFile(path).read_for_appending().lines == []
    path.write_text('{"model": {"suite_name": "builtin"\n')  # a crash during the first append
    assert len(ResultsFile(path).read_for_appending().bad_lines) == 1
