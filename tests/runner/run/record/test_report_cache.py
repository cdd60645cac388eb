"""runner/run/record/report_cache.py: the reports' cache refreshed after a sweep, never failing it."""

from __future__ import annotations

import logging

from core.files.results_file import append_line
from reports.read import cache
from reports.read.columnar import Engine
from runner.run.record import report_cache
from runner.run.record.report_cache import refresh_report_cache
from tests.reports.conftest import craft_line


def results_file(tmp_path):
    path = tmp_path / "results.jsonl"
    for model in ("mlp", "cnn"):
        append_line(path, craft_line(model, times=[1.0, 2.0]))
    return path


def test_a_large_results_file_is_cached_where_the_reports_look(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("EXPERIMENT_RUNNER_CACHE_DIR", str(folder))
    monkeypatch.setattr(report_cache, "REFRESH_MIN_BYTES", 0)
    path = results_file(tmp_path)
    refresh_report_cache(path)
    with Engine(cache.default_cache_dir()) as engine:
        (scan,) = engine.add([path])
    assert scan.from_cache and scan.rows == 2


def test_a_small_one_is_left_to_the_report(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("EXPERIMENT_RUNNER_CACHE_DIR", str(folder))
    assert not refresh_report_cache(results_file(tmp_path))
    assert not folder.exists()
    assert not refresh_report_cache(results_file(tmp_path), tmp_path / "given")
    assert not (tmp_path / "given").exists()


def test_a_cache_that_cannot_be_written_is_a_warning(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("EXPERIMENT_RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(report_cache, "REFRESH_MIN_BYTES", 0)
    monkeypatch.setattr(cache, "_open_cached", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left")))
    path = results_file(tmp_path)
    with caplog.at_level(logging.WARNING):
        refresh_report_cache(path)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "was not refreshed" in warning and "No space left" in warning and str(path) in warning
