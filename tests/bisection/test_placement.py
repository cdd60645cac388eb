"""Where the points measured at once run: one GPU each (round robin) and equal, disjoint
shares of the cores on a host of several GPUs; today's sweeps with one GPU or none."""

from __future__ import annotations

import pytest

from bisection.driver import BisectError
from bisection.placement import point_slots, sweep_flag
from runner.plan.slots import CUDA_VISIBLE_DEVICES

#: CPUs no machine has: no SMT siblings in sysfs, so the shares do not depend on the host.
CORES = tuple(range(4096, 4108))


def no_probe() -> int:
    raise AssertionError("the probe was asked, where the GPUs were already known")


def placed(slots):
    return [(slot.cuda_device, slot.cpu_set) for slot in slots]


def test_each_point_of_a_round_gets_its_gpu_and_a_disjoint_share_of_the_cores(monkeypatch):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "4,5,6")
    slots = point_slots(3, [], ["-k", "launches"], cores=CORES, gpu_count=no_probe)
    assert placed(slots) == [("4", CORES[0:4]), ("5", CORES[4:8]), ("6", CORES[8:12])]
    assert [slot.environment() for slot in slots] == [
        {CUDA_VISIBLE_DEVICES: "4"}, {CUDA_VISIBLE_DEVICES: "5"}, {CUDA_VISIBLE_DEVICES: "6"}]
    assert not any(slot.shares_device for slot in slots)


def test_more_points_than_gpus_go_round_robin_and_take_turns_on_the_shared_ones(monkeypatch):
    monkeypatch.delenv(CUDA_VISIBLE_DEVICES, raising=False)
    slots = point_slots(3, ["0", "1"], [], cores=CORES, gpu_count=no_probe)
    assert [slot.cuda_device for slot in slots] == ["0", "1", "0"]
    assert [slot.shares_device for slot in slots] == [True, False, True]
    shares = [set(slot.cpu_set) for slot in slots]
    assert all(len(share) == 4 for share in shares)
    assert set.union(*shares) == set(CORES)  # 12 cores: disjoint shares of 4


def test_without_cuda_visible_devices_the_probe_counts_the_gpus(monkeypatch):
    monkeypatch.delenv(CUDA_VISIBLE_DEVICES, raising=False)
    slots = point_slots(2, [], [], cores=CORES, gpu_count=lambda: 4)
    assert placed(slots) == [("0", CORES[:6]), ("1", CORES[6:])]


def test_shares_of_unequal_size_are_cut_to_the_smallest(monkeypatch):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "0,1,2")
    slots = point_slots(3, [], [], cores=CORES[:11], gpu_count=no_probe)
    assert [len(slot.cpu_set) for slot in slots] == [3, 3, 3]
    cores = [core for slot in slots for core in slot.cpu_set]
    assert len(cores) == len(set(cores))


@pytest.mark.parametrize("visible", ["", "3"])
def test_no_gpu_or_one_gpu_keeps_todays_sweeps(monkeypatch, visible):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, visible)
    assert point_slots(3, [], [], cores=CORES, gpu_count=no_probe) == []
    monkeypatch.delenv(CUDA_VISIBLE_DEVICES)
    assert point_slots(3, [], [], cores=CORES, gpu_count=lambda: len(visible)) == []


def test_one_point_at_a_time_keeps_todays_sweeps_without_probing(monkeypatch):
    monkeypatch.delenv(CUDA_VISIBLE_DEVICES, raising=False)
    assert point_slots(1, [], [], cores=CORES, gpu_count=no_probe) == []


def test_one_named_device_is_every_sweeps_taken_in_turns(monkeypatch):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "0,1,2,3")
    slots = point_slots(2, ["2"], [], cores=CORES, gpu_count=no_probe)
    assert placed(slots) == [("2", ()), ("2", ())]
    assert all(slot.shares_device for slot in slots)


def test_too_few_cores_for_the_points_is_refused_with_the_numbers(monkeypatch):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "0,1,2")
    with pytest.raises(BisectError, match=r"--jobs=3 needs at least 3 cores"):
        point_slots(3, [], [], cores=CORES[:2], gpu_count=no_probe)


def test_sweeps_run_by_ray_are_left_to_ray(monkeypatch):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "0,1,2")
    assert point_slots(3, [], ["--executor", "ray"], cores=CORES, gpu_count=no_probe) == []
    with pytest.raises(BisectError, match="--devices=0,1 does not apply.*--executor=ray"):
        point_slots(2, ["0", "1"], ["--executor=ray"], cores=CORES, gpu_count=no_probe)


def test_the_sweeps_own_devices_flag_conflicts_only_where_points_are_spread(monkeypatch):
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "0,1")
    with pytest.raises(BisectError, match="give bisect --devices"):
        point_slots(2, [], ["--devices=0"], cores=CORES, gpu_count=no_probe)
    assert point_slots(1, [], ["--devices=0"], cores=CORES, gpu_count=no_probe) == []
    monkeypatch.setenv(CUDA_VISIBLE_DEVICES, "0")
    assert point_slots(2, [], ["--devices=0"], cores=CORES, gpu_count=no_probe) == []


def test_sweep_flag_reads_both_spellings_and_the_last_wins():
    assert sweep_flag(["--executor", "local", "--executor=ray"], "--executor") == "ray"
    assert sweep_flag(["--executors=ray"], "--executor") is None
    assert sweep_flag(["-k", "x"], "--devices") is None
