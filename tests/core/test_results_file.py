import multiprocessing
from pathlib import Path

import pytest

from core.results_file import ResultsFileError, append_line, backup_existing, read_results


def write_many(path: str, writer: int, count: int) -> None:
    for index in range(count):
        append_line(Path(path), {"writer": writer, "index": index, "pad": "x" * 5000})


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
    first = backup_existing(path)
    append_line(path, {"n": 2})
    second = backup_existing(path)
    assert not path.exists() and first != second
    assert [read_results(p).lines for p in (first, second)] == [[{"n": 1}], [{"n": 2}]]
    assert backup_existing(path) is None
