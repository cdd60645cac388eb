"""reports/read/cache.py's refresh: the cache the runner brings up to date after a sweep."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from core.files.results_file import append_line
from reports.cli import compare_main, report_main, score_main
from reports.read import cache, engine
from reports.read.columnar import Engine
from reports.read.load import load
from tests.reports.conftest import craft_line


def night(run: str, start: float, models=("mlp", "cnn")) -> list[dict]:
    lines = [craft_line(model, times=[1.0 + i, 2.0 + i], run_id=run, timestamp=start + i)
             for i, model in enumerate(models)]
    for line in lines:  # the settings compare names (reports.analyse.settings_diff)
        line["environment"] = {"torch_settings": {"num_threads": len(run), "run": run}}
    return lines


def same_as_a_full_parse(path, report_cache):
    """The cached read gives exactly what a read without the cache gives."""
    cached, plain = load([path], cache_dir=report_cache), load([path])
    assert cached.records == plain.records
    assert cached.bad_lines == plain.bad_lines and cached.unusable == plain.unusable
    assert cached.runs == plain.runs
    assert cached.total_lines == plain.total_lines and cached.superseded == plain.superseded
    with Engine(report_cache) as with_cache, Engine(None) as without:
        (kept,), (parsed,) = with_cache.add([path]), without.add([path])
        assert kept.settings == parsed.settings
    return cached


@pytest.fixture
def parse_forbidden(monkeypatch):
    """While active, any parse of a results file fails the test."""
    def forbid(on: bool = True):
        if on:
            monkeypatch.setattr(engine, "parse", lambda *a, **k: pytest.fail("a line was parsed again"))
        else:
            monkeypatch.undo()
    return forbid


def test_after_a_refresh_the_first_report_parses_nothing(write_results, report_cache, parse_forbidden):
    path = write_results([*night("a", 1.0), "{broken", "[1]"])
    assert cache.refresh(path, report_cache)
    parse_forbidden()
    with Engine(report_cache) as engine:
        (scan,) = engine.add([path])
        assert scan.from_cache
        assert [(b.lineno, b.reason) for b in scan.bad_lines] == [
            (3, "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
            (4, "not a JSON object")]
    parse_forbidden(False)
    same_as_a_full_parse(path, report_cache)


def test_each_refresh_parses_only_what_the_sweep_appended(write_results, report_cache, monkeypatch):
    path = write_results(night("a", 1.0))
    cache.refresh(path, report_cache)
    parsed = []
    real_parse = engine.parse
    monkeypatch.setattr(engine, "parse", lambda con, source, *a, **k: parsed.append(
        source.read_bytes()) or real_parse(con, source, *a, **k))
    for line in night("b", 10.0, ("mlp", "cnn", "transformer_block")):
        append_line(path, line)
    cache.refresh(path, report_cache)
    (tail,) = parsed
    assert tail.count(b"\n") == 3 and b'"run_id":"a"' not in tail.replace(b" ", b"")
    loaded = same_as_a_full_parse(path, report_cache)
    assert [r.run_id for r in loaded.runs] == ["a", "b"] and len(loaded.records) == 3


def test_a_line_being_written_is_never_cached(write_results, report_cache):
    path = write_results(night("a", 1.0))
    with open(path, "a", encoding="utf-8") as raw:
        raw.write('{"environment": {"torch_settings": {"num_threads": 9}}, "model": {"model_name": "half')
    cache.refresh(path, report_cache)
    assert [b.lineno for b in load([path], cache_dir=report_cache).bad_lines] == [3]
    same_as_a_full_parse(path, report_cache)
    with open(path, "a", encoding="utf-8") as raw:  # the writer finishes it
        raw.write('"}}\n')
    append_line(path, craft_line("cnn", times=[5.0], run_id="b", timestamp=9.0))
    cache.refresh(path, report_cache)
    loaded = same_as_a_full_parse(path, report_cache)
    assert not loaded.bad_lines and loaded.unusable and loaded.total_lines == 4
    with Engine(report_cache) as engine:
        (scan,) = engine.add([path])
    assert [json.loads(text)["num_threads"] for text, _ in scan.settings] == [1, 9]  # the finished line's too


@pytest.mark.parametrize("change", ["replaced", "truncated", "rewritten in place"])
def test_a_file_changed_otherwise_than_by_appending_is_parsed_again(write_results, report_cache, change):
    path = write_results([*night("a", 1.0), *night("b", 5.0)])
    cache.refresh(path, report_cache)
    text = path.read_bytes()
    if change == "replaced":
        path.unlink()
        write_results(night("c", 20.0, ("transformer_block",)), name=path.name)
    elif change == "truncated":
        with open(path, "r+b") as raw:
            raw.truncate(text.index(b"\n") + 1)
    else:  # same inode and size, another run id in the last line
        with open(path, "r+b") as raw:
            raw.seek(text.rindex(b'"run_id": "b"') if b'"run_id": "b"' in text else text.rindex(b'"run_id":"b"'))
            raw.write(text[raw.tell():].replace(b'"b"', b'"z"', 1))
        assert os.path.getsize(path) == len(text)
    cache.refresh(path, report_cache)
    same_as_a_full_parse(path, report_cache)


def test_a_cache_held_by_a_report_or_unwritable_is_not_waited_for(write_results, report_cache, tmp_path,
                                                                  monkeypatch):
    from filelock import FileLock

    path = write_results(night("a", 1.0))
    monkeypatch.setattr(cache, "REFRESH_LOCK_TIMEOUT_S", 0.05)
    cache.refresh(path, report_cache)
    (folder,) = report_cache.iterdir()
    append_line(path, craft_line("transformer_block", times=[1.0], run_id="b", timestamp=9.0))
    with FileLock(str(folder / "lock")):  # a report caching the file meanwhile
        assert not cache.refresh(path, report_cache)
    blocker = tmp_path / "not a folder"
    blocker.write_text("")
    assert not cache.refresh(path, blocker / "cache")
    same_as_a_full_parse(path, report_cache)


# The reports' cache trusts nothing it did not check (issue 54, defects 1 to 7): any change
# to the results file is seen, a damaged cache is built again, paths of any spelling work,
# numbers at the edge of their range never crash, and a cache that cannot be written is only
# a slower read.

#: An hour ago: a file last written then is no longer being written (its status is trusted).
AN_HOUR_AGO = 3600


def padded(model: str, seconds: float, run: str = "run-1", pad: int = 3000) -> dict:
    line = craft_line(model, times=[seconds, seconds], run_id=run)
    line["environment"] = {"padding": "x" * pad}
    return line


def big_file(write_results, middle_seconds: float = 0.1) -> Path:
    """A file of 101 lines of 3 KB (past the 64 KiB heads and tails a cache might sample),
    `middle` in line 51."""
    models = [padded(f"filler{i}", 0.01) for i in range(50)]
    lines = [*models[:50], padded("middle", middle_seconds), *[padded(f"tail{i}", 0.01) for i in range(50)]]
    return write_results(lines)


def settle(path: Path) -> None:
    """Date the file's last write an hour back, as a file a sweep wrote long ago."""
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns - AN_HOUR_AGO * 10**9))


def rewrite_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Replace `old` by `new` (same length) where it first occurs, in place: same inode,
    same size."""
    assert len(old) == len(new)
    text = path.read_bytes()
    at = text.index(old)
    with open(path, "r+b") as raw:
        raw.seek(at)
        raw.write(new)
    assert path.stat().st_size == len(text)


def middle_time(capsys) -> str:
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.startswith("builtin/middle")]
    return row


@pytest.mark.parametrize("then_append", [False, True])
def test_a_line_rewritten_in_the_middle_is_seen(write_results, capsys, then_append):
    # Defect 1: the cache compared the first and last 64 KiB only: 100 ms stayed shown.
    path = big_file(write_results)
    settle(path)
    assert report_main([str(path)]) == 0
    assert "100 ms" in middle_time(capsys)
    rewrite_in_place(path, b"[0.1,0.1]", b"[0.9,0.9]")
    if then_append:  # and a sweep appends a line meanwhile
        with open(path, "ab") as raw:
            raw.write(json.dumps(padded("appended", 0.02)).encode() + b"\n")
    assert report_main([str(path)]) == 0
    assert "900 ms" in middle_time(capsys)


def test_an_edit_right_after_a_report_is_seen(write_results, capsys):
    # The status of a file written a moment ago cannot tell an edit within the same tick
    # of the file system's clock: such a cache is checked byte for byte next time.
    path = big_file(write_results)
    assert report_main([str(path)]) == 0
    capsys.readouterr()
    stat = path.stat()
    rewrite_in_place(path, b"[0.1,0.1]", b"[0.9,0.9]")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same tick
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert report_main([str(path)]) == 0
    assert "900 ms" in middle_time(capsys)


def test_an_unchanged_file_is_read_from_the_cache_without_reading_it(write_results, report_cache,
                                                                     monkeypatch):
    monkeypatch.setattr(cache, "RACY_NS", 0)  # its status, taken just now, trusted at once
    path = big_file(write_results)
    settle(path)
    with Engine(report_cache) as engine:
        engine.add([path])
    monkeypatch.setattr(cache, "_crc", lambda *a, **k: pytest.fail("the file was read again"))
    with Engine(report_cache) as engine:
        (scan,) = engine.add([path])
    assert scan.from_cache


def _cache_folder(report_cache: Path) -> Path:
    (folder,) = [p for p in report_cache.iterdir() if p.is_dir()]
    return folder


@pytest.mark.parametrize("damage", ["part cut short", "part missing", "rows not a number",
                                    "meta no JSON", "meta a list", "meta a folder"])
def test_a_damaged_cache_is_built_again(write_results, report_cache, capsys, caplog, damage):
    # Defect 2: a Parquet part cut short (DuckDB IOException) or a meta.json whose rows is
    # no number (ValueError) broke every later report of the file.
    path = big_file(write_results)
    settle(path)
    assert report_main([str(path)]) == 0
    capsys.readouterr()
    folder = _cache_folder(report_cache)
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text())
    (part,) = [Path(p["path"]) for p in meta["parts"]]
    if damage == "part cut short":
        part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    elif damage == "part missing":
        part.unlink()
    elif damage == "rows not a number":
        meta["rows"] = "many"
        meta_path.write_text(json.dumps(meta))
    elif damage == "meta no JSON":
        meta_path.write_text("{\"rows\": ")
    elif damage == "meta a list":
        meta_path.write_text("[1, 2]")
    else:
        meta_path.unlink()
        meta_path.mkdir()
    assert report_main([str(path)]) == 0
    assert "100 ms" in middle_time(capsys)
    # Built again: the next report reads it from the cache.
    with Engine(report_cache) as engine:
        (scan,) = engine.add([path])
    assert scan.from_cache


def test_a_cache_under_a_folder_with_an_apostrophe(write_results, tmp_path, capsys):
    # Defect 3: COPY ... TO '<path>' was built without escaping: a ParserException.
    path = big_file(write_results)
    settle(path)
    folder = tmp_path / "o'brien" / "cache"
    for _ in range(2):
        assert report_main([str(path), "--cache-dir", str(folder)]) == 0
        assert "100 ms" in middle_time(capsys)
    with Engine(folder) as engine:
        (scan,) = engine.add([path])
    assert scan.from_cache


@pytest.mark.parametrize("cached", [True, False])
def test_a_results_file_whose_name_is_no_utf8(write_results, tmp_path, capsys, caplog, cached):
    # Defect 4: the cache hashed the path as UTF-8 (UnicodeEncodeError), and DuckDB refuses
    # such a path (--no-cache).
    caplog.set_level(logging.ERROR)  # the log's records hold the name as it is: xdist cannot send them
    name = os.fsdecode(b"results-\xff\xfe.jsonl")
    path = write_results([craft_line("mlp", times=[0.25, 0.25]), "{broken"], name=name)
    assert path.exists()
    argv = [str(path)] + ([] if cached else ["--no-cache"])
    for _ in range(2):  # built, then read from the cache
        assert report_main(argv) == 0
        out = capsys.readouterr().out
        assert "250 ms" in out and "results-\\xff\\xfe.jsonl line 2" in out
    base = write_results([craft_line("mlp", times=[0.25, 0.25])])
    assert compare_main([str(base), str(path)] + argv[1:]) == 0


@pytest.mark.parametrize("entries", [2**63, 1e19, 2**64 + 1])
def test_cold_start_entries_too_large_for_an_integer(write_results, capsys, entries):
    # Defect 5: a DuckDB ConversionException in every report, compare and score of the file;
    # compare's exit 1 read as a regression.
    odd = craft_line("cnn", times=[0.1, 0.1, 0.1])
    odd["summary"]["cold_start_entries"] = entries
    path = write_results([craft_line("mlp", times=[0.2, 0.2]), odd])
    assert report_main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "200 ms" in out and "builtin/cnn" in out
    assert compare_main([str(path), str(path)]) == 0
    assert score_main([str(path), "--reference", str(path)]) == 0


@pytest.mark.parametrize("key, value", [("timestamp", 1e20), ("timestamp", -1e12),
                                        ("finished_at", 1e20), ("timestamp", "1e20")])
def test_a_timestamp_no_date_can_show_skips_the_line(write_results, capsys, tmp_path, key, value):
    # Defect 6: OverflowError / ValueError formatting the run's date.
    odd = craft_line("cnn", times=[0.1], run_id="odd")
    odd[key] = value
    path = write_results([craft_line("mlp", times=[0.2], run_id="good"), odd])
    for cached in ([], ["--no-cache"]):
        assert report_main([str(path), "--html", str(tmp_path / "r.html"), *cached]) == 0
        out = capsys.readouterr().out
        assert f"skipped {path} line 2: its {key} " in out and "out of the range of dates" in out
        assert "builtin/cnn" not in out and "200 ms" in out


def test_the_runner_skips_such_a_line_too(write_results):
    from core.files.results_file import read_results

    odd = craft_line("cnn", times=[0.1])
    odd["timestamp"] = 1e20
    path = write_results([craft_line("mlp", times=[0.2]), odd])
    read = read_results(path)
    assert len(read.lines) == 1 and [b.lineno for b in read.bad_lines] == [2]


def test_a_cache_that_cannot_be_written_reads_without_it(write_results, report_cache, capsys,
                                                          caplog, monkeypatch):
    # Defect 7 (in process; the CLI under `ulimit -f` is tests/reports/test_untrusted_output.py):
    # a COPY that failed (DuckDB IOException) crashed the report. Here each Parquet part is
    # written into a folder that does not exist: DuckDB's own IOException.
    path = big_file(write_results)
    settle(path)

    class Unwritable:
        hex = "/missing/0000000000000000"  # part-/missing/...: a folder that does not exist

    def fail_writes(on: bool) -> None:
        if on:
            monkeypatch.setattr(cache.uuid, "uuid4", lambda: Unwritable())
        else:
            monkeypatch.undo()

    fail_writes(True)
    assert report_main([str(path)]) == 0
    assert "100 ms" in middle_time(capsys)
    assert "the reports' cache cannot be written" in caplog.text and "IO Error" in caplog.text
    assert not list(_cache_folder(report_cache).glob("part-*"))
    # The cache written once, then appended to while it cannot be written.
    fail_writes(False)
    assert report_main([str(path)]) == 0
    capsys.readouterr()
    with open(path, "ab") as raw:
        raw.write(json.dumps(padded("appended", 0.02)).encode() + b"\n")
    fail_writes(True)
    for _ in range(2):
        assert report_main([str(path)]) == 0
        out = capsys.readouterr().out
        assert "builtin/appended" in out and "100 ms" in out
