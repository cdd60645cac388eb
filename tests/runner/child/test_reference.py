"""The reference workload (runner/child/reference.py), run in this process on the CPU."""

from __future__ import annotations

from runner.child.reference import LAUNCHES, measure_reference


def test_the_reference_times_a_launch_loop_and_a_kernel_on_the_cpu():
    figures = measure_reference("cpu", repeats=3)
    assert figures["device"] == "cpu" and figures["launches"] == LAUNCHES
    # A launch costs microseconds, not nothing and not a millisecond; the kernel is short.
    assert 0.05 < figures["launch_us"] < 1000
    assert 0 < figures["kernel_ms"] < 1000


def test_no_reference_where_the_device_has_none():
    assert measure_reference("tpu") is None
