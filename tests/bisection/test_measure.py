"""The measurer's sweeps for points measured at once: each started with its slot's GPU in
its environment and pinned to its slot's cores, and today's sweeps where there are no slots.
In the e2e tests a shell script that reports what it was given stands in for the point's
interpreter, so nothing is swept."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bisection.driver import Point
from bisection.measure import RunnerMeasurer, pinning
from bisection.placement import point_slots
from bisection.points import PointPlace
from core.host.cpus import parse_cpu_list
from runner.plan.slots import CUDA_VISIBLE_DEVICES

POINTS = [Point(f"c{i:02d}", f"c{i:02d}") for i in range(3)]
#: Stands in for the point's interpreter: says the GPU and the cores it was started with.
REPORTER = """#!/bin/sh
echo "gpu=${CUDA_VISIBLE_DEVICES-unset}"
grep Cpus_allowed_list /proc/self/status
"""


class ReportingPlaces:
    def __init__(self, python: Path):
        self.python = python

    def place(self, point: Point, log_file: Path) -> PointPlace:
        return PointPlace(python=str(self.python))


@pytest.fixture
def reporter(tmp_path) -> ReportingPlaces:
    script = tmp_path / "python"
    script.write_text(REPORTER)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return ReportingPlaces(script)


def started_with(measurer: RunnerMeasurer, point: Point) -> tuple[str, tuple[int, ...]]:
    """The GPU and the cores the point's sweep was started with, as its log says."""
    lines = measurer.point_log(point).read_text().splitlines()
    gpu = next(line for line in lines if line.startswith("gpu=")).partition("=")[2]
    cores = next(line for line in lines if line.startswith("Cpus_allowed_list"))
    return gpu, parse_cpu_list(cores.partition(":")[2].strip())


CORES = tuple(range(4096, 4108))  # no machine's: no SMT siblings to group
SWEEP = ["-k", "launches", "--accelerator", "cuda"]


def spread_and_today(tmp_path) -> tuple[RunnerMeasurer, RunnerMeasurer, PointPlace]:
    """A measurer of 3 points at once spread over the GPUs CUDA_VISIBLE_DEVICES names, one as
    today (no spreading), and a point's place."""
    measurer = RunnerMeasurer(tmp_path, SWEEP, ReportingPlaces(Path("python")), jobs=3,
                              slots=point_slots(3, [], SWEEP, cores=CORES))
    today = RunnerMeasurer(tmp_path, SWEEP, ReportingPlaces(Path("python")), jobs=3)
    return measurer, today, PointPlace(python="python")


def test_k_points_get_gpu_i_mod_n_and_disjoint_cores_and_todays_command(tmp_path, monkeypatch):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "0,1")
    measurer, today, place = spread_and_today(tmp_path)
    pinned = []
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cores: pinned.append((pid, cores)))
    for index, point in enumerate(POINTS):
        slot = measurer.slot_of(index)
        environment = measurer.environment(place, slot)
        assert environment[CUDA_VISIBLE_DEVICES] == ["0", "1", "0"][index]
        assert {k: v for k, v in environment.items() if k != CUDA_VISIBLE_DEVICES} == \
            {k: v for k, v in today.environment(place).items() if k != CUDA_VISIBLE_DEVICES}
        assert measurer.command(point, place, None, 0) == today.command(point, place, None, 0)
        pinning(slot)()
    assert pinned == [(0, frozenset(CORES[0:4])), (0, frozenset(CORES[4:8])),
                      (0, frozenset(CORES[8:12]))]


def test_without_gpus_each_sweep_starts_as_today(tmp_path, monkeypatch):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "")
    measurer, today, place = spread_and_today(tmp_path)
    for index, point in enumerate(POINTS):
        slot = measurer.slot_of(index)
        assert slot is None and pinning(slot) is None
        assert measurer.environment(place, slot) == today.environment(place)
        assert measurer.environment(place, slot)[CUDA_VISIBLE_DEVICES] == ""
        assert measurer.command(point, place, None, 0) == today.command(point, place, None, 0)


@pytest.fixture
def two_cores() -> list[int]:
    """Two of this process's cores, one for each of two sweeps."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two cores to give each sweep one of its own")
    return cores[:2]


@pytest.mark.e2e
def test_points_at_once_start_on_their_gpu_and_their_own_cores(tmp_path, reporter, two_cores,
                                                              monkeypatch):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "5,7")
    slots = point_slots(2, [], ["-k", "launches"], cores=two_cores)
    measurer = RunnerMeasurer(tmp_path / "out", ["-k", "launches"], reporter, jobs=2,
                              slots=slots)
    assert measurer.measure(POINTS[:2], None, 0) == {}
    assert started_with(measurer, POINTS[0]) == ("5", (two_cores[0],))
    assert started_with(measurer, POINTS[1]) == ("7", (two_cores[1],))
    assert "on core" in measurer.point_log(POINTS[0]).read_text()


@pytest.mark.e2e
def test_a_slot_holds_one_sweep_at_a_time_and_the_command_names_no_device(tmp_path, reporter,
                                                                         two_cores, monkeypatch):
    """More points than slots (the measurer does not rely on the search's rounds): the third
    point waits for the first one's slot and gets its GPU and cores; the GPUs the probe
    counts are named 0..n-1; the command stays the runner's."""
    monkeypatch.delenv(CUDA_VISIBLE_DEVICES, raising=False)
    slots = point_slots(2, [], [], cores=two_cores, gpu_count=lambda: 2)
    measurer = RunnerMeasurer(tmp_path / "out", ["-k", "launches"], reporter, jobs=2,
                              slots=slots)
    assert [measurer.slot_of(i).cuda_device for i in range(3)] == ["0", "1", "0"]
    assert measurer.measure(POINTS, None, 0) == {}
    assert [started_with(measurer, point)[0] for point in POINTS] == ["0", "1", "0"]
    place = reporter.place(POINTS[0], tmp_path / "log")
    assert not any("--devices" in arg for arg in measurer.command(POINTS[0], place, None, 0))
    assert [started_with(measurer, point)[1] for point in POINTS] == [
        (two_cores[0],), (two_cores[1],), (two_cores[0],)]
