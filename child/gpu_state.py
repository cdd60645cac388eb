"""The card's state over the timed runs, read from NVML (child side, CUDA only).

A compiled model's fused kernels follow the SM clock, which the driver lowers when the card
reaches its power limit or heats up; two runs of the same work then differ with nothing on
the host to show it. Over the timed runs the watch records the SM clock at their start and
end (and the card's maximum), the temperature, the average power (from the card's energy
counter), and for how much of the time the driver held the clocks down for power or for heat
(NVML's violation counters), with the reasons it gave at the end. No flag follows from these
yet: running at the power limit is normal for a busy card.

NVML comes from the `nvidia-ml-py` package (`pynvml`); without it, or without a card NVML
can see, the line's `summary.gpu` is null.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Optional

log = logging.getLogger(__name__)

#: NVML's enumerations (nvml.h): the SM clock, the GPU's temperature sensor, and the
#: performance policies whose violation counters time the clocks held down.
CLOCK_SM = 1
TEMPERATURE_GPU = 0
POLICIES = {"power": 0, "thermal": 1}
#: NVML's clock event reasons (nvml.h's nvmlClocksEventReason* bits) by name.
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
    0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def reason_names(mask: int) -> list[str]:
    """The names of the clock event reasons set in `mask` (unknown bits by their value)."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    if unknown:
        names.append(hex(unknown))
    return names


@dataclass(frozen=True)
class GpuSample:
    """One reading of the card: wall clock, SM clock (MHz), temperature (C), the energy
    counter (mJ), and the violation counters (ns) of each policy in POLICIES."""

    wall: float
    sm_clock_mhz: int
    temperature_c: int
    energy_mj: Optional[int]
    violation_ns: dict[str, int]


@dataclass(frozen=True)
class GpuWindow:
    """What the card did between two samples."""

    start: GpuSample
    end: GpuSample
    max_sm_clock_mhz: Optional[int]
    reasons_at_end: list[str]

    @property
    def wall_s(self) -> float:
        return max(self.end.wall - self.start.wall, 1e-9)

    def power_w(self) -> Optional[float]:
        if self.start.energy_mj is None or self.end.energy_mj is None:
            return None
        return (self.end.energy_mj - self.start.energy_mj) / 1e3 / self.wall_s

    def held_down_fraction(self) -> dict[str, float]:
        """For each policy, the share of the window the driver held the clocks down for it."""
        return {name: max(self.end.violation_ns[name] - self.start.violation_ns[name], 0)
                / 1e9 / self.wall_s
                for name in self.start.violation_ns if name in self.end.violation_ns}

    def to_dict(self) -> dict[str, Any]:
        return {
            "sm_clock_mhz": {"start": self.start.sm_clock_mhz, "end": self.end.sm_clock_mhz,
                             "max": self.max_sm_clock_mhz},
            "temperature_c": {"start": self.start.temperature_c,
                              "end": self.end.temperature_c},
            "power_w": self.power_w(),
            "clocks_held_down": self.held_down_fraction(),
            "clock_event_reasons_at_end": self.reasons_at_end,
            "wall_s": self.wall_s,
        }


class GpuWatch:
    """Watches one card over the timed runs through NVML: `start()`, then `stop()`."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self.nvml, self.handle = nvml, handle
        self._start: Optional[GpuSample] = None
        self.window: Optional[GpuWindow] = None

    @classmethod
    def for_cuda_device(cls, uuid: str) -> Optional["GpuWatch"]:
        """A watch of the card with this UUID (as torch gives it, without NVML's "GPU-"
        prefix), or None where NVML is missing or cannot see it (logged)."""
        try:
            import pynvml
        except ImportError:
            log.info("no NVML (the nvidia-ml-py package): the card's state is not recorded")
            return None
        try:
            pynvml.nvmlInit()
            name = uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
            return cls(pynvml, pynvml.nvmlDeviceGetHandleByUUID(name))
        except Exception as error:  # NVMLError and its many subclasses
            log.warning("NVML cannot watch the card %s: %s", uuid, error)
            return None

    def _optional(self, read: Any, *args: Any) -> Any:
        try:
            return read(self.handle, *args)
        except Exception:  # a counter this card or driver does not offer
            return None

    def sample(self) -> GpuSample:
        violations = {}
        for name, policy in POLICIES.items():
            status = self._optional(self.nvml.nvmlDeviceGetViolationStatus, policy)
            if status is not None:
                violations[name] = int(status.violationTime)
        return GpuSample(
            time.perf_counter(),
            int(self.nvml.nvmlDeviceGetClockInfo(self.handle, CLOCK_SM)),
            int(self.nvml.nvmlDeviceGetTemperature(self.handle, TEMPERATURE_GPU)),
            self._optional(self.nvml.nvmlDeviceGetTotalEnergyConsumption),
            violations,
        )

    def _reasons(self) -> list[str]:
        read = (getattr(self.nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or getattr(self.nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
        mask = self._optional(read) if read is not None else None
        return reason_names(int(mask)) if mask is not None else []

    def sm_clock_mhz(self) -> Optional[int]:
        """The SM clock now (MHz), or None where NVML cannot read it (one NVML call: read
        around each timed run by child/host_state.py)."""
        value = self._optional(self.nvml.nvmlDeviceGetClockInfo, CLOCK_SM)
        return None if value is None else int(value)

    def performance_state(self) -> Optional[int]:
        """The card's performance state now (0, the fastest, to 15), or None."""
        value = self._optional(self.nvml.nvmlDeviceGetPerformanceState)
        return None if value is None else int(value)

    def start(self) -> None:
        try:
            self._start = self.sample()
        except Exception as error:
            log.warning("NVML could not read the card: %s", error)
            self._start = None

    def stop(self) -> Optional[GpuWindow]:
        if self._start is None:
            return None
        try:
            end = self.sample()
        except Exception as error:
            log.warning("NVML could not read the card: %s", error)
            return None
        maximum = self._optional(self.nvml.nvmlDeviceGetMaxClockInfo, CLOCK_SM)
        self.window = GpuWindow(self._start, end, None if maximum is None else int(maximum),
                                self._reasons())
        return self.window
