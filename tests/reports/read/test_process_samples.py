"""Reports take an experiment's timing processes as its samples (docs/timing.md)."""

from __future__ import annotations

import pytest

from reports.analyse.compare import NOISE, REGRESSED, compare
from reports.read.load import load
from tests.reports.conftest import craft_line


def _line(times, medians=None, **kwargs):
    extra = {"processes": {"count": len(medians), "medians": medians}} if medians else None
    return craft_line("mlp", "inductor", times=times, extra_metrics=extra, **kwargs)


def test_the_median_and_interval_come_from_the_processes(write_results):
    # The timed runs say 1.0, but three processes gave 2.0, 3.0 and 4.0.
    path = write_results([_line([1.0] * 12, medians=[2.0, 3.0, 4.0])])
    record = load([path]).records[0]
    assert record.per_iter_times == [2.0, 3.0, 4.0]
    assert record.median_time == 3.0
    assert (record.interval.low, record.interval.high) == (2.0, 4.0)


def test_one_process_keeps_the_timed_runs_as_samples(write_results):
    path = write_results([_line([1.0, 2.0, 3.0], medians=[2.0])])
    assert load([path]).records[0].per_iter_times == [1.0, 2.0, 3.0]


def test_compare_tests_processes_not_iterations(write_results):
    # Iterations alone would make a 10% shift certain (20 runs a side, no overlap); the
    # processes, which overlap, say it is within noise.
    base = write_results([_line([1.0 + i * 1e-4 for i in range(20)], medians=[0.9, 1.0, 1.1])])
    new = write_results([_line([1.1 + i * 1e-4 for i in range(20)], medians=[1.0, 1.1, 1.2])])
    change = compare(load([base]).records, load([new]).records).changes[0]
    assert change.ratio == pytest.approx(1.1)
    assert change.verdict == NOISE
    iterations_only = compare(
        load([write_results([_line([1.0 + i * 1e-4 for i in range(20)])])]).records,
        load([write_results([_line([1.1 + i * 1e-4 for i in range(20)])])]).records).changes[0]
    assert iterations_only.verdict == REGRESSED
