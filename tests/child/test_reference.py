"""The reference workload (child/reference.py), run in this process on the CPU."""

from __future__ import annotations

import os

import pytest

from child.reference import (LAUNCHES, PULSE_LOOPS, REFERENCE_SHARE, REPEATS, REPICK_RATIO,
                                    CorePicker, autograd_threads, host_pulse, measure_reference,
                                    pulse_reading, tries_for)


def test_the_reference_times_a_launch_loop_and_a_kernel_on_the_cpu():
    figures = measure_reference("cpu", repeats=3)
    assert figures["device"] == "cpu" and figures["launches"] == LAUNCHES
    # A launch costs microseconds, not nothing and not a millisecond; the kernel is short.
    assert 0.05 < figures["launch_us"] < 1000
    assert 0 < figures["kernel_ms"] < 1000


def test_a_reading_says_its_tries_and_what_one_cost():
    figures = measure_reference("cpu", repeats=1)
    assert figures["tries"] == 1 and 0 < figures["try_s"] < 10
    warm = measure_reference("cpu", repeats=2, warm=False)
    assert warm["tries"] == 2 and warm["launches"] == LAUNCHES


def test_the_reading_after_the_timed_runs_costs_a_share_of_them():
    # Timed runs whose share pays for no try get none, a long one the most; a reading that
    # gave no cost one.
    assert tries_for(0.05, 0.02) == 0
    assert tries_for(0.99 * 0.02 / REFERENCE_SHARE, 0.02) == 0
    assert tries_for(1.01 * 0.02 / REFERENCE_SHARE, 0.02) == 1
    assert tries_for(2 * 0.02 / REFERENCE_SHARE, 0.02) == 2
    assert tries_for(600.0, 0.02) == REPEATS
    assert tries_for(600.0, None) == 1


def test_no_reference_where_the_device_has_none():
    assert measure_reference("tpu") is None


def test_the_host_pulse_is_a_fixed_python_loop_timed_in_milliseconds():
    assert 0 < host_pulse() < 1000
    # Ten times the loop takes longer than one (a fixed amount of work, not a fixed time).
    assert min(host_pulse(PULSE_LOOPS * 10) for _ in range(3)) > min(host_pulse() for _ in range(3))


def test_a_pulse_reading_is_the_median_keyed_like_the_readings_around_it():
    around = {"launch_us": 5.0, "kernel_ms": 0.2, "device": "cpu", "threads": 4}
    reading = pulse_reading([1.0, 3.0, 1.2, 9.0, 1.1], around, "cpu")
    assert reading["host_ms"] == pytest.approx(1.2) and reading["pulses_ms"][3] == 9.0
    assert reading["device"] == "cpu" and reading["threads"] == 4
    assert reading["loops"] == PULSE_LOOPS
    assert pulse_reading([2.0], None, "cuda") == {"host_ms": 2.0, "pulses_ms": [2.0],
                                                   "loops": PULSE_LOOPS, "device": "cuda"}
    assert pulse_reading([], around, "cpu") is None


class FakeHost:
    """Cores of known speeds: a pulse reads the speed of the core the thread is pinned to."""

    def __init__(self, speeds):
        self.speeds = dict(speeds)
        self.pinned = tuple(self.speeds)
        self.pins = []

    def pin(self, cores):
        self.pinned = tuple(cores)
        self.pins.append(self.pinned)

    def pulse(self):
        assert len(self.pinned) == 1, "a pulse is read on one core"
        return self.speeds[self.pinned[0]]


def test_the_picker_stays_on_the_core_where_the_pulse_ran_fastest():
    host = FakeHost({0: 1.1, 1: 0.6, 2: 1.2, 3: 0.7})
    picker = CorePicker((0, 1, 2, 3), pulse=host.pulse, pin=host.pin, companions=lambda: [])
    assert picker.pick() == 1 and host.pinned == (1,)
    assert picker.picks == [{"core": 1, "pulse_ms": 0.6, "scan_median_ms": pytest.approx(0.9),
                             "companions": 0}]
    picker.release()
    assert host.pinned == (0, 1, 2, 3)


def test_the_picker_moves_when_its_core_slows_down_and_not_before():
    host = FakeHost({0: 1.1, 1: 0.6, 2: 0.7})
    picker = CorePicker((0, 1, 2), pulse=host.pulse, pin=host.pin)
    picker.pick()
    assert not picker.slowed(0.6 * REPICK_RATIO * 0.99)
    picker.follow(0.6 * REPICK_RATIO * 0.99)  # within the ratio: stays
    assert [pick["core"] for pick in picker.picks] == [1] and host.pinned == (1,)
    host.speeds[1] = 1.2  # another tenant took core 1's other half
    assert picker.slowed(1.2)
    picker.follow(1.2)
    assert [pick["core"] for pick in picker.picks] == [1, 2] and host.pinned == (2,)
    assert picker.record() == {"candidates": 3, "picks": picker.picks}


def test_the_picker_pins_the_calling_thread_for_real():
    cores = tuple(sorted(os.sched_getaffinity(0)))
    picker = CorePicker(cores)
    try:
        core = picker.pick()
        assert os.sched_getaffinity(0) == {core}
    finally:
        picker.release()
    assert os.sched_getaffinity(0) == set(cores)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to pin apart")
def test_the_picker_takes_autograd_device_threads_along_and_gives_them_back():
    """A backward pass on CUDA launches its kernels from autograd's device thread
    ("pt_autograd_<device>"), not the thread that called it: that thread goes with the
    timing thread to each pick, and gets the child's cores back at release. A thread named
    otherwise keeps its cores."""
    import ctypes
    import threading

    libc = ctypes.CDLL(None)
    started, stop, ids = threading.Barrier(3), threading.Event(), {}

    def thread(name):
        libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME, as torch names its threads
        ids[name] = threading.get_native_id()
        started.wait()
        stop.wait()

    workers = [threading.Thread(target=thread, args=(name,), daemon=True)
               for name in ("pt_autograd_0", "pt_other_0")]
    for worker in workers:
        worker.start()
    started.wait()
    cores = tuple(sorted(os.sched_getaffinity(0)))
    picker = CorePicker(cores)
    try:
        assert ids["pt_autograd_0"] in autograd_threads()
        assert ids["pt_other_0"] not in autograd_threads()
        core = picker.pick()
        assert os.sched_getaffinity(ids["pt_autograd_0"]) == {core}
        assert os.sched_getaffinity(ids["pt_other_0"]) == set(cores)
        assert picker.picks[-1]["companions"] == 1
    finally:
        picker.release()
        stop.set()
    assert os.sched_getaffinity(ids["pt_autograd_0"]) == set(cores)
    for worker in workers:
        worker.join()
