"""The card's state over the timed runs (child/gpu_state.py), read through a stand-in
for NVML's Python binding: the window's arithmetic, the reasons' names, missing counters."""

from __future__ import annotations

import sys
import types

import pytest

from child.gpu_state import (
    CLOCK_SM, GpuSample, GpuWatch, GpuWindow, POLICIES, reason_names,
)


class Violation:
    def __init__(self, nanoseconds: int) -> None:
        self.referenceTime, self.violationTime = 0, nanoseconds


class FakeNvml:
    """NVML as pynvml offers it, for one card whose counters advance at each reading."""

    def __init__(self, energy: bool = True, violations: bool = True) -> None:
        self.readings = 0
        self.energy, self.violations = energy, violations
        self.handles: list[str] = []

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        self.handles.append(uuid)
        return "card"

    def nvmlDeviceGetClockInfo(self, handle, clock):
        assert handle == "card" and clock == CLOCK_SM
        self.readings += 1
        return 1980 if self.readings == 1 else 1755

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        return 1980

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 40 + 10 * (self.readings - 1)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.energy:
            raise RuntimeError("not supported")
        return 1_000_000 * self.readings

    def nvmlDeviceGetViolationStatus(self, handle, policy):
        if not self.violations:
            raise RuntimeError("not supported")
        held = {POLICIES["power"]: 300_000_000, POLICIES["thermal"]: 0}[policy]
        return Violation(held * (self.readings - 1))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x4 | 0x20


def sample(wall, energy, power_ns, thermal_ns, clock=1900):
    return GpuSample(wall, clock, 50, energy, {"power": power_ns, "thermal": thermal_ns})


def test_the_window_averages_power_and_tells_how_long_the_clocks_were_held_down():
    window = GpuWindow(sample(10.0, 5_000_000, 1_000_000_000, 0),
                       sample(12.0, 6_400_000, 1_500_000_000, 200_000_000, clock=1600),
                       1980, ["sw_power_cap"])
    record = window.to_dict()
    assert record["power_w"] == pytest.approx(1400.0 / 2.0)
    assert record["clocks_held_down"] == pytest.approx({"power": 0.25, "thermal": 0.1})
    assert record["sm_clock_mhz"] == {"start": 1900, "end": 1600, "max": 1980}
    assert record["clock_event_reasons_at_end"] == ["sw_power_cap"]


def test_reason_names_name_every_bit_and_keep_unknown_ones():
    assert reason_names(0) == []
    assert reason_names(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert reason_names(0x1 | 0x10000) == ["gpu_idle", "0x10000"]


def test_the_watch_reads_the_card_between_start_and_stop():
    nvml = FakeNvml()
    watch = GpuWatch(nvml, "card")
    watch.start()
    window = watch.stop()
    record = window.to_dict()
    assert record["sm_clock_mhz"] == {"start": 1980, "end": 1755, "max": 1980}
    assert record["temperature_c"] == {"start": 40, "end": 50}
    assert record["power_w"] > 0
    assert record["clocks_held_down"]["thermal"] == 0.0
    assert record["clocks_held_down"]["power"] > 0
    assert record["clock_event_reasons_at_end"] == ["sw_power_cap", "sw_thermal_slowdown"]


def test_counters_a_card_lacks_are_left_out_not_fatal():
    watch = GpuWatch(FakeNvml(energy=False, violations=False), "card")
    watch.start()
    record = watch.stop().to_dict()
    assert record["power_w"] is None and record["clocks_held_down"] == {}
    assert record["sm_clock_mhz"]["end"] == 1755


def test_a_watch_that_never_started_gives_no_window():
    assert GpuWatch(FakeNvml(), "card").stop() is None


def test_the_card_is_found_by_its_uuid_with_nvmls_prefix(monkeypatch):
    nvml = FakeNvml()
    module = types.ModuleType("pynvml")
    for name in dir(nvml):
        if name.startswith("nvml"):
            setattr(module, name, getattr(nvml, name))
    monkeypatch.setitem(sys.modules, "pynvml", module)
    watch = GpuWatch.for_cuda_device("8a6ac2f1-0000-1111-2222-333344445555")
    assert watch is not None and watch.handle == "card"
    assert nvml.handles == ["GPU-8a6ac2f1-0000-1111-2222-333344445555"]


def test_without_nvml_there_is_no_watch(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    assert GpuWatch.for_cuda_device("8a6ac2f1") is None
