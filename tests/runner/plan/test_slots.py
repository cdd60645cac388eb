"""Slots: disjoint core shares, one GPU each, and clear refusals."""

from __future__ import annotations

import pytest

from runner.plan.slots import (CUDA_VISIBLE_DEVICES, Slot, SlotError, auto_per_gpu,
                               plan_slots, split_cores, visible_gpus)


def test_core_shares_are_disjoint_contiguous_and_cover_every_core():
    shares = split_cores([7, 0, 1, 2, 3, 4, 5, 6, 8, 9], 4)
    assert shares == [(0, 1, 2), (3, 4, 5), (6, 7), (8, 9)]
    assert sorted(core for share in shares for core in share) == list(range(10))


def test_more_jobs_than_cores_is_refused_with_the_numbers():
    with pytest.raises(SlotError, match=r"--jobs=3 needs at least 3 cores.*has 2 \(0,1\)"):
        split_cores([0, 1], 3)


def test_one_job_keeps_all_cores_and_the_runners_own_gpu_view():
    assert plan_slots(1, [], uses_cuda=True, gpus=["0", "1"], cores=[0, 1, 2, 3]) == [Slot(0)]
    assert Slot(0).environment() == {}


def test_cuda_jobs_get_one_gpu_each_and_their_share_of_cores():
    slots = plan_slots(2, [], uses_cuda=True, gpus=["0", "1", "2"], cores=range(8))
    assert [(slot.cpu_set, slot.cuda_device) for slot in slots] == [
        ((0, 1, 2, 3), "0"), ((4, 5, 6, 7), "1")]
    assert slots[1].environment() == {CUDA_VISIBLE_DEVICES: "1"}


def test_cpu_jobs_leave_the_gpu_view_alone():
    slots = plan_slots(2, [], uses_cuda=False, gpus=[], cores=[0, 1])
    assert [slot.cuda_device for slot in slots] == [None, None]
    assert [slot.cpu_set for slot in slots] == [(0,), (1,)]


def test_more_cuda_jobs_than_gpus_is_refused():
    with pytest.raises(SlotError, match=r"--jobs=3 runs one CUDA experiment per GPU.*sees 2 GPU"):
        plan_slots(3, [], uses_cuda=True, gpus=["0", "1"], cores=range(8))


def test_devices_name_the_gpus_and_set_the_job_count():
    slots = plan_slots(1, ["3", "1"], uses_cuda=True, gpus=["0"], cores=range(4))
    assert [(slot.cpu_set, slot.cuda_device) for slot in slots] == [((0, 1), "3"), ((2, 3), "1")]


@pytest.mark.parametrize("jobs, devices, message", [
    (3, ["0", "1"], "--jobs=3 and --devices=0,1 disagree"),
    (1, ["0", "0"], "names a device twice"),
])
def test_contradictory_device_requests_are_refused(jobs, devices, message):
    with pytest.raises(SlotError, match=message):
        plan_slots(jobs, devices, uses_cuda=True, gpus=["0", "1"], cores=range(4))


def test_devices_on_a_sweep_without_cuda_experiments_are_refused():
    with pytest.raises(SlotError, match=r"--devices=0,1 names CUDA devices, and this sweep runs "
                                        r"no CUDA experiment"):
        plan_slots(1, ["0", "1"], uses_cuda=False, gpus=[], cores=range(4))


def test_visible_gpus_follow_the_runners_own_cuda_visible_devices():
    assert visible_gpus(2, {CUDA_VISIBLE_DEVICES: "5, 7"}) == ["5", "7"]
    assert visible_gpus(3, {}) == ["0", "1", "2"]
    assert visible_gpus(0, {}) == []


def smt_pairs(core: int) -> tuple[int, ...]:
    """A host of 8 physical cores with 2 threads each, Linux's usual numbering: CPU n and
    n + 8 share a core."""
    return (core % 8, core % 8 + 8)


def test_smt_siblings_go_to_the_same_share():
    """Seen on a 64-CPU GPU host: contiguous halves 0-31 and 32-63 put both threads of a core
    in different jobs, so one job's compile slowed the other's host-bound timing."""
    shares = split_cores(range(16), 2, siblings=smt_pairs)
    assert shares == [(0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15)]
    cores_of = [{core % 8 for core in share} for share in shares]
    assert not cores_of[0] & cores_of[1]


def test_more_shares_than_physical_cores_fall_back_to_logical_cpus():
    assert split_cores([0, 1, 8, 9], 3, siblings=smt_pairs) == [(0, 1), (8,), (9,)]


def test_a_slot_describes_its_cores_as_a_cpu_list():
    assert Slot(1, (0, 1, 8, 9)).describe() == "cores 0-1,8-9"


def test_gpus_shared_by_several_slots_get_their_slots_in_turn_each_on_its_own_cores():
    slots = plan_slots(1, ["2", "3"], uses_cuda=True, gpus=["0"], cores=range(12), per_gpu=3)
    assert [(slot.cuda_device, slot.cpu_set) for slot in slots] == [
        ("2", (0, 1)), ("3", (2, 3)), ("2", (4, 5)), ("3", (6, 7)), ("2", (8, 9)),
        ("3", (10, 11))]
    assert all(slot.shares_device for slot in slots)
    assert "GPU 3 (shared, in turns)" in slots[1].describe()


def test_one_slot_per_gpu_does_not_share_it():
    assert not any(slot.shares_device for slot in plan_slots(2, [], uses_cuda=True,
                                                             gpus=["0", "1"], cores=range(4)))


def test_sharing_the_first_gpu_when_no_gpu_is_named():
    slots = plan_slots(1, [], uses_cuda=True, gpus=["5", "6"], cores=range(4), per_gpu=2)
    assert [(slot.cuda_device, slot.cpu_set) for slot in slots] == [("5", (0, 1)), ("5", (2, 3))]


@pytest.mark.parametrize("uses_cuda, gpus, cores, message", [
    (False, ["0"], range(4), r"--experiments-per-gpu=2 shares GPUs, and this sweep runs no CUDA"),
    (True, [], range(4), r"--experiments-per-gpu=2 shares GPUs, and this runner sees none"),
    (True, ["0"], range(1), r"--experiments-per-gpu=2 on 1 GPU\(s\) runs 2 experiments.*has 1 \(0\)"),
])
def test_sharing_gpus_that_cannot_be_shared_is_refused(uses_cuda, gpus, cores, message):
    with pytest.raises(SlotError, match=message):
        plan_slots(1, [], uses_cuda=uses_cuda, gpus=gpus, cores=cores, per_gpu=2)


@pytest.mark.parametrize("gpu_count, cpu_count, shareable, expected", [
    (1, 16, True, 3), (4, 64, True, 3),  # each of 3 keeps 5 CPUs
    (1, 8, True, 2), (2, 16, True, 2),   # 3 would leave 2, and 2 leave 4
    (1, 7, True, 1),                     # 2 would leave 3 CPUs
    (1, 64, False, 1), (0, 16, True, 1),
])
def test_auto_shares_a_gpu_among_at_most_three_each_keeping_four_cpus(
        gpu_count, cpu_count, shareable, expected):
    assert auto_per_gpu(gpu_count, cpu_count, shareable) == expected


@pytest.mark.parametrize("experiments, expected", [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3),
                                                   (40, 3)])
def test_auto_makes_no_more_slots_than_the_experiments_need(experiments, expected):
    # On 2 GPUs: one experiment a GPU keeps all of the GPU's cores for it.
    assert auto_per_gpu(2, 64, True, experiments) == expected


def test_auto_slots_share_the_runners_gpus_only_where_its_experiments_may():
    shared = plan_slots(2, [], uses_cuda=True, gpus=["0", "1"], cores=range(24), per_gpu=None,
                        shareable=True)
    assert [(slot.cuda_device, len(slot.cpu_set)) for slot in shared] == [
        ("0", 4), ("1", 4), ("0", 4), ("1", 4), ("0", 4), ("1", 4)]
    assert all(slot.shares_device for slot in shared)
    alone = plan_slots(2, [], uses_cuda=True, gpus=["0", "1"], cores=range(24), per_gpu=None)
    assert [(slot.cuda_device, slot.shares_device) for slot in alone] == [("0", False), ("1", False)]
    # A CPU sweep, or a runner that sees no GPU, keeps its one slot of all cores.
    for uses_cuda, gpus in ((False, ["0"]), (True, [])):
        assert plan_slots(1, [], uses_cuda=uses_cuda, gpus=gpus, cores=range(24), per_gpu=None,
                          shareable=True) == [Slot(0, (), None)]
