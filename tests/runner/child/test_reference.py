"""The reference workload (runner/child/reference.py), run in this process on the CPU."""

from __future__ import annotations

import pytest

from runner.child.reference import LAUNCHES, PULSE_LOOPS, host_pulse, measure_reference, pulse_reading


def test_the_reference_times_a_launch_loop_and_a_kernel_on_the_cpu():
    figures = measure_reference("cpu", repeats=3)
    assert figures["device"] == "cpu" and figures["launches"] == LAUNCHES
    # A launch costs microseconds, not nothing and not a millisecond; the kernel is short.
    assert 0.05 < figures["launch_us"] < 1000
    assert 0 < figures["kernel_ms"] < 1000


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
