"""reports/read/cache.py's refresh: the cache the runner brings up to date after a sweep."""

from __future__ import annotations

import json
import os

import pytest

from core.files.results_file import append_line
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
